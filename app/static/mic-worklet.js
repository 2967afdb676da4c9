// The operator page's microphone (/live): capture -> 16 kHz mono 16-bit PCM, in ~100 ms
// chunks posted to the page, which sends each as one binary WebSocket frame (API.md
// "Speech in"). Runs on the audio thread, 128 samples at a time at the context's rate
// (usually 48 kHz or 44.1 kHz).
//
// Resampled here rather than by the server: 16 kHz is a third of the bytes of 48 kHz, and
// an AudioContext cannot be trusted to run at 16 kHz on every browser. The method is the
// server's own (app/speech/resample.py): a windowed-sinc low-pass below 8 kHz (without it,
// everything above 8 kHz folds back into the band speech is recognised in), then linear
// interpolation at exact positions, so no drift over a long talk.
"use strict";

const RATE_OUT = 16000;
const CHUNK = 1600; // output samples per message: 100 ms

function lowpassTaps(ratio) {
  const half = Math.ceil(8 * ratio);
  const cutoff = 0.45 / ratio; // cycles per input sample: 0.9 of the output's Nyquist
  const taps = new Float32Array(2 * half + 1);
  let sum = 0;
  for (let i = 0; i < taps.length; i++) {
    const n = i - half;
    const x = 2 * cutoff * n;
    const sinc = n === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    // Blackman window
    const w = 0.42 - 0.5 * Math.cos((2 * Math.PI * i) / (taps.length - 1)) +
      0.08 * Math.cos((4 * Math.PI * i) / (taps.length - 1));
    taps[i] = 2 * cutoff * sinc * w;
    sum += taps[i];
  }
  for (let i = 0; i < taps.length; i++) taps[i] /= sum;
  return taps;
}

class Pcm16k extends AudioWorkletProcessor {
  constructor() {
    super();
    this.rateIn = sampleRate; // the AudioWorkletGlobalScope's rate
    this.taps = this.rateIn > RATE_OUT ? lowpassTaps(this.rateIn / RATE_OUT) : null;
    // the last taps-1 input samples, so filtering is seamless across blocks
    this.history = new Float32Array(this.taps ? this.taps.length - 1 : 0);
    this.filtered = []; // filtered input not yet consumed
    this.consumed = 0; // index (in the filtered stream) of filtered[0]
    this.next = 0; // index of the next output sample
    this.out = new Int16Array(CHUNK);
    this.fill = 0;
  }

  filter(block) {
    if (!this.taps) return block;
    const n = this.taps.length;
    const padded = new Float32Array(this.history.length + block.length);
    padded.set(this.history);
    padded.set(block, this.history.length);
    const result = new Float32Array(block.length);
    for (let i = 0; i < block.length; i++) {
      let acc = 0;
      for (let j = 0; j < n; j++) acc += padded[i + j] * this.taps[n - 1 - j];
      result[i] = acc;
    }
    this.history = padded.slice(padded.length - (n - 1));
    return result;
  }

  emit(sample) {
    const s = Math.max(-1, Math.min(1, sample));
    this.out[this.fill++] = Math.round(s * 32767);
    if (this.fill === CHUNK) {
      this.port.postMessage(this.out.buffer, [this.out.buffer]);
      this.out = new Int16Array(CHUNK);
      this.fill = 0;
    }
  }

  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true; // no capture yet: keep running
    // downmix: the mean of the channels
    const frames = input[0].length;
    const mono = new Float32Array(frames);
    for (const channel of input) for (let i = 0; i < frames; i++) mono[i] += channel[i];
    if (input.length > 1) for (let i = 0; i < frames; i++) mono[i] /= input.length;
    for (const v of this.filter(mono)) this.filtered.push(v);
    // output k sits at filtered position k * rateIn / rateOut; it needs floor(pos) + 1
    const end = this.consumed + this.filtered.length;
    for (;;) {
      const pos = (this.next * this.rateIn) / RATE_OUT;
      const i = Math.floor(pos);
      if (i + 1 >= end) break;
      const frac = pos - i;
      const a = this.filtered[i - this.consumed], b = this.filtered[i + 1 - this.consumed];
      this.emit(a * (1 - frac) + b * frac);
      this.next++;
    }
    const keep = Math.floor((this.next * this.rateIn) / RATE_OUT);
    if (keep > this.consumed) {
      this.filtered = this.filtered.slice(keep - this.consumed);
      this.consumed = keep;
    }
    return true;
  }
}

registerProcessor("pcm-16k", Pcm16k);
