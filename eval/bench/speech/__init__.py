"""Speech recognition: word error rate and final latency, and what speech costs
(``livetrans bench speech``)."""
