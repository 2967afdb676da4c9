"""Streaming sample-rate conversion to the 16 kHz that speech recognisers listen at.

Used where audio enters: the live socket's audio input (``app.live.audio``: a browser
sends 44.1 or 48 kHz) and the caption client's files (``clients.audio``). Plain numpy, so
that it runs wherever the server runs.
"""

from __future__ import annotations

import numpy as np

RATE = 16_000


def lowpass_taps(rate_in: int, rate_out: int = RATE) -> np.ndarray:
    """A windowed-sinc low-pass below the output's Nyquist frequency.

    Without it, downsampling 44.1/48 kHz speech folds everything above 8 kHz (fricatives,
    noise) back into the band the recogniser listens to.
    """
    ratio = rate_in / rate_out
    half = int(np.ceil(8 * ratio))
    n = np.arange(-half, half + 1)
    cutoff = 0.45 / ratio  # cycles per input sample: 0.9 of the output's Nyquist
    taps = 2 * cutoff * np.sinc(2 * cutoff * n) * np.blackman(2 * half + 1)
    return taps / taps.sum()


class Resampler:
    """Streaming sample-rate conversion to 16 kHz: block by block, exact across blocks.

    Linear interpolation, after a low-pass when downsampling. Positions are kept as exact
    integers (output sample ``k`` sits at input sample ``k * rate_in / rate_out``), so a
    stream cut into any blocks gives the same samples as the whole stream at once, and a
    long recording does not drift.
    """

    def __init__(self, rate_in: int, rate_out: int = RATE) -> None:
        self.rate_in, self.rate_out = rate_in, rate_out
        self.taps = lowpass_taps(rate_in, rate_out) if rate_in > rate_out else None
        self._history = np.zeros(0 if self.taps is None else len(self.taps) - 1)
        self._buf = np.zeros(0)  # filtered input not yet fully consumed
        self._buf_start = 0  # index of _buf[0] in the filtered input stream
        self._next_out = 0  # index of the next output sample

    def process(self, block: np.ndarray) -> np.ndarray:
        """The output samples that ``block`` (mono floats) completes."""
        block = np.asarray(block, dtype=np.float64)
        if self.rate_in == self.rate_out:
            return block
        if self.taps is not None:
            padded = np.concatenate([self._history, block])
            self._history = padded[len(padded) - (len(self.taps) - 1):]
            block = np.convolve(padded, self.taps, mode="valid")
        buf = np.concatenate([self._buf, block])
        end = self._buf_start + len(buf)  # input samples available: [_buf_start, end)
        # output k needs input floor(pos) and floor(pos)+1 with pos = k*rate_in/rate_out
        last = ((end - 1) * self.rate_out - 1) // self.rate_in if end > 1 else -1
        ks = np.arange(self._next_out, last + 1)
        out = np.zeros(0)
        if len(ks):
            num = ks * self.rate_in
            idx = num // self.rate_out
            frac = (num % self.rate_out) / self.rate_out
            local = idx - self._buf_start
            out = buf[local] * (1 - frac) + buf[local + 1] * frac
            self._next_out = int(ks[-1]) + 1
        keep_from = (self._next_out * self.rate_in) // self.rate_out
        keep_from = min(keep_from, end - 1) if end else 0
        self._buf = buf[keep_from - self._buf_start:]
        self._buf_start = keep_from
        return out


def to_pcm16(samples: np.ndarray) -> bytes:
    """Floats on the int16 scale as 16-bit little-endian PCM (clipped, rounded)."""
    return np.clip(np.round(samples), -32768, 32767).astype("<i2").tobytes()
