"use strict";
// The room's interpreter voice for a listener on /watch (docs/room-voice.md).
//
// First over WebRTC (WHEP: POST /v1/rooms/{room}/voice/{lang}/whep with a receive-only
// offer): the voice within a second of the room's clock, on every phone browser. The
// connection follows the room from talk to talk; when it fails (the network dropped, the
// phone slept, the replica went away) it is made again, with a growing pause, and at once
// when the page becomes visible or the network comes back.
//
// When WebRTC cannot be had (no RTCPeerConnection, or the server refuses: too many
// listeners, no WebRTC there), the HLS audio playlist GET /v1/rooms/{room}/voice/{lang}.m3u8,
// played from its live edge, a few seconds later than WebRTC.
//
// Where the browser has Media Source Extensions for ADTS AAC (Chrome, Edge, Firefox,
// Android), segments are fetched and appended here: a live edge a segment or two behind
// the talk, jumps back to it after the phone slept or the network dropped, and a fresh
// start when the room's next talk begins. Elsewhere (iPhone Safari) the <audio> element
// plays the playlist natively. Browsers start sound only from a user gesture: start() is
// called from the listen button's click.
//
// An AnalyserNode reads the level of what plays (the page's meter, and the tests' ears).
(function () {
  const POLL_MS = 1000;          // the live playlist is read this often
  const IDLE_POLL_MS = 4000;     // ... while there is no voice, or the talk has ended
  const LAG_JUMP_S = 8;          // more than this behind the newest audio: jump to it
  const KEEP_S = 30;             // audio kept behind the playhead
  const MSE_TYPE = "audio/aac";
  const RETRY_MS = [1000, 2000, 4000, 8000];  // reconnecting WebRTC: pauses, the last repeats
  const DISCONNECTED_MS = 4000;  // "disconnected" this long: reconnect (it may come back)

  function parsePlaylist(text) {
    // the segments (sequence number, URI), whether it ended
    const lines = text.split(/\r?\n/);
    let sequence = 0, ended = false;
    const segments = [];
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (line.startsWith("#EXT-X-MEDIA-SEQUENCE:")) sequence = parseInt(line.slice(22), 10) || 0;
      else if (line === "#EXT-X-ENDLIST") ended = true;
      else if (line.startsWith("#EXTINF:")) {
        const uri = (lines[i + 1] || "").trim();
        if (uri && !uri.startsWith("#")) segments.push({seq: sequence + segments.length, uri});
      }
    }
    return {segments, ended};
  }

  class RoomVoice {
    constructor(audio, {room, lang, token, onState}) {
      this.audio = audio;
      const base = `/v1/rooms/${encodeURIComponent(room)}/voice/${encodeURIComponent(lang)}`;
      const query = token ? `?token=${encodeURIComponent(token)}` : "";
      this.url = `${base}.m3u8${query}`;
      this.whepUrl = `${base}/whep${query}`;
      this.mode = "";          // "webrtc" or "hls"
      this.pc = null;
      this.location = null;    // the WHEP resource, DELETEd on stop
      this.retries = 0;
      this.retryTimer = null;
      this.onState = onState || (() => {});
      this.running = false;
      this.timer = null;
      this.talk = "";          // the talk whose segments are in the buffer
      this.next = -1;          // the next sequence number to append
      this.source = null;
      this.buffer = null;
      this.context = null;
      this.analyser = null;
      this.samples = null;
    }

    static supported() {
      return !!window.RTCPeerConnection
        || (window.MediaSource && MediaSource.isTypeSupported(MSE_TYPE))
        || document.createElement("audio").canPlayType("application/vnd.apple.mpegurl") !== "";
    }

    start() {
      this.running = true;
      // the AudioContext is made inside the tap (autoplay rules), the sound routed later
      this.context = new (window.AudioContext || window.webkitAudioContext)();
      document.addEventListener("visibilitychange", this.resume = () => {
        if (document.hidden || !this.running) return;
        if (this.context && this.context.state === "suspended") this.context.resume();
        if (this.mode === "webrtc") this.reconnectIfDown();
        else { this.jumpToEdge(); this.poll(); }
      });
      window.addEventListener("online", this.resume);
      if (window.RTCPeerConnection && !this.forceHls()) this.startWebrtc();
      else this.startHls();
    }

    forceHls() { return new URLSearchParams(location.search).get("listen") === "hls"; }

    startHls() {
      this.mode = "hls";
      this.listenLevel();
      if (window.MediaSource && MediaSource.isTypeSupported(MSE_TYPE)) this.startMse();
      else {                                    // native HLS (Safari)
        this.audio.src = this.url;
        this.audio.play().catch((e) => this.onState("error", String(e.message || e)));
        this.onState("playing");
      }
    }

    // ---- WebRTC (WHEP) ----
    async startWebrtc() {
      this.mode = "webrtc";
      clearTimeout(this.retryTimer);
      const pc = this.pc = new RTCPeerConnection();
      pc.addTransceiver("audio", {direction: "recvonly"});
      pc.ontrack = (ev) => {
        const stream = ev.streams[0] || new MediaStream([ev.track]);
        this.audio.srcObject = stream;
        this.audio.play().catch((e) => this.onState("error", String(e.message || e)));
        this.meterStream(stream);
      };
      pc.onconnectionstatechange = () => {
        if (pc !== this.pc || !this.running) return;
        const state = pc.connectionState;
        if (state === "connected") { this.retries = 0; this.onState("playing"); }
        else if (state === "failed" || state === "closed") this.reconnect();
        else if (state === "disconnected") {
          this.onState("waiting", "reconnecting…");
          setTimeout(() => { if (pc === this.pc && pc.connectionState !== "connected") this.reconnect(); },
                     DISCONNECTED_MS);
        }
      };
      try {
        await pc.setLocalDescription(await pc.createOffer());
        await this.gathered(pc);
        const r = await fetch(this.whepUrl, {method: "POST", body: pc.localDescription.sdp,
                                             headers: {"Content-Type": "application/sdp"}});
        if (!this.running || pc !== this.pc) return;
        if (r.status === 401 || r.status === 404 || r.status === 503 || r.status === 429) {
          // no WebRTC for this listener here: HLS, which every replica serves
          const why = await r.json().then((b) => b.error?.message, () => "");
          pc.close(); this.pc = null;
          this.onState("waiting", why || `WebRTC refused (HTTP ${r.status}); HLS instead`);
          if (this.running) this.startHls();
          return;
        }
        if (r.status !== 201) throw new Error(`HTTP ${r.status}`);
        this.location = r.headers.get("Location");
        await pc.setRemoteDescription({type: "answer", sdp: await r.text()});
      } catch (e) {
        if (pc === this.pc && this.running) this.reconnect();
      }
    }

    gathered(pc) {
      // WHEP without trickle: the offer carries its candidates (at most a second's wait)
      if (pc.iceGatheringState === "complete") return Promise.resolve();
      return new Promise((done) => {
        const t = setTimeout(done, 1000);
        pc.addEventListener("icegatheringstatechange", () => {
          if (pc.iceGatheringState === "complete") { clearTimeout(t); done(); }
        });
      });
    }

    reconnect() {
      if (!this.running) return;
      this.hangUp();
      this.onState("waiting", "reconnecting…");
      const pause = RETRY_MS[Math.min(this.retries++, RETRY_MS.length - 1)];
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.startWebrtc(), pause);
    }

    reconnectIfDown() {
      const state = this.pc ? this.pc.connectionState : "closed";
      if (state !== "connected" && state !== "connecting" && state !== "new") {
        this.retries = 0;
        clearTimeout(this.retryTimer);
        this.hangUp();
        this.startWebrtc();
      }
    }

    hangUp() {
      if (this.location) {
        fetch(this.location, {method: "DELETE", keepalive: true}).catch(() => {});
        this.location = null;
      }
      if (this.pc) { this.pc.ontrack = null; this.pc.onconnectionstatechange = null; this.pc.close(); }
      this.pc = null;
    }

    meterStream(stream) {
      // the level of the remote stream (the element plays it; the meter only listens)
      try {
        if (this.context.state === "suspended") this.context.resume();
        const node = this.context.createMediaStreamSource(stream);
        this.analyser = this.context.createAnalyser();
        this.analyser.fftSize = 1024;
        node.connect(this.analyser);
        this.samples = new Float32Array(this.analyser.fftSize);
      } catch (e) {
        this.analyser = null;
      }
    }

    stop() {
      this.running = false;
      clearTimeout(this.timer);
      clearTimeout(this.retryTimer);
      this.hangUp();
      this.audio.srcObject = null;
      this.audio.pause();
      this.audio.removeAttribute("src");
      this.audio.load();
      if (this.resume) {
        document.removeEventListener("visibilitychange", this.resume);
        window.removeEventListener("online", this.resume);
      }
      if (this.context) this.context.close().catch(() => {});
      this.context = null; this.analyser = null;
      this.onState("stopped");
    }

    listenLevel() {
      try {
        const node = this.context.createMediaElementSource(this.audio);
        this.analyser = this.context.createAnalyser();
        this.analyser.fftSize = 1024;
        node.connect(this.analyser);
        this.analyser.connect(this.context.destination);
        this.samples = new Float32Array(this.analyser.fftSize);
      } catch (e) {
        this.analyser = null;               // the sound still plays; no meter
      }
    }

    level() {
      // the RMS of what plays now, 0..1 (0 without a meter)
      if (!this.analyser) return 0;
      this.analyser.getFloatTimeDomainData(this.samples);
      let sum = 0;
      for (const v of this.samples) sum += v * v;
      return Math.sqrt(sum / this.samples.length);
    }

    startMse() {
      this.source = new MediaSource();
      this.audio.src = URL.createObjectURL(this.source);
      this.source.addEventListener("sourceopen", () => {
        this.buffer = this.source.addSourceBuffer(MSE_TYPE);
        this.buffer.mode = "sequence";
        this.poll();
      }, {once: true});
      this.audio.play().catch((e) => this.onState("error", String(e.message || e)));
    }

    async poll() {
      clearTimeout(this.timer);
      if (!this.running || !this.buffer) return;
      let wait = POLL_MS;
      try {
        const r = await fetch(this.url, {cache: "no-store"});
        if (r.status === 404) {
          this.onState("waiting", "no voice in this language yet");
          wait = IDLE_POLL_MS;
        } else if (!r.ok) {
          this.onState("waiting", `the voice is not available (HTTP ${r.status})`);
          wait = IDLE_POLL_MS;
        } else {
          const talk = r.headers.get("X-Livetrans-Talk") || "";
          const list = parsePlaylist(await r.text());
          if (talk !== this.talk) this.newTalk(talk, list);
          await this.append(list);
          if (list.ended && this.next > (list.segments.at(-1)?.seq ?? -1)) {
            this.onState("ended");
            wait = IDLE_POLL_MS;
          } else {
            this.onState("playing");
          }
        }
      } catch (e) {
        this.onState("waiting", "reconnecting…");
        wait = IDLE_POLL_MS;
      }
      if (this.running) this.timer = setTimeout(() => this.poll(), wait);
    }

    newTalk(talk, list) {
      // a talk starts (or the first one is found): from its live edge, or from its start
      // when it is already over (nothing live to catch)
      this.talk = talk;
      const segments = list.segments;
      if (!segments.length) { this.next = -1; return; }
      this.next = list.ended ? segments[0].seq : segments[Math.max(0, segments.length - 2)].seq;
      this.clear();
    }

    clear() {
      const b = this.buffer;
      if (b && !b.updating && b.buffered.length) {
        try { b.remove(0, Infinity); } catch (e) { /* the next append replaces it */ }
      }
    }

    async append(list) {
      for (const segment of list.segments) {
        if (segment.seq < this.next || !this.running) continue;
        const url = new URL(segment.uri, new URL(this.url, location.href));
        const r = await fetch(url, {cache: "force-cache"});
        if (!r.ok) break;                  // not yet (or gone): the next poll tries again
        const data = await r.arrayBuffer();
        await this.whenIdle();
        this.buffer.appendBuffer(data);
        await this.whenIdle();
        this.next = segment.seq + 1;
      }
      this.trim();
      this.jumpToEdge();
      if (this.audio.paused && this.running) this.audio.play().catch(() => {});
    }

    whenIdle() {
      const b = this.buffer;
      if (!b.updating) return Promise.resolve();
      return new Promise((done) => b.addEventListener("updateend", done, {once: true}));
    }

    jumpToEdge() {
      const b = this.buffer;
      if (!b || !b.buffered.length) return;
      const end = b.buffered.end(b.buffered.length - 1);
      if (end - this.audio.currentTime > LAG_JUMP_S) this.audio.currentTime = end - 2;
    }

    trim() {
      const b = this.buffer, t = this.audio.currentTime;
      if (b && !b.updating && b.buffered.length && t - b.buffered.start(0) > KEEP_S * 2) {
        try { b.remove(0, t - KEEP_S); } catch (e) { /* later */ }
      }
    }
  }

  window.RoomVoice = RoomVoice;
})();
