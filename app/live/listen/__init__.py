"""Listening to a room's voice within a second: WHEP (WebRTC egress) listeners fed by the
room voice's live feed (``app.rooms.voice.live_feed``), the route beside them."""
