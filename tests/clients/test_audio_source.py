"""``livetrans caption --audio SOURCE`` beyond WAV: any file FFmpeg reads and live URLs,
decoded by PyAV (``clients.audio_source``), without a server.

Media is encoded by Debian's ffmpeg into tmp_path; live sources run on loopback (an HLS
folder over HTTP, ``ffmpeg -listen 1`` as an RTMP server, a UDP sender). Every wait is a
bound against hanging, never a timing check.
"""

from __future__ import annotations

import argparse
import math
import resource
import signal
import threading
import tracemalloc
from pathlib import Path

import av
import numpy as np
import pytest

from app.usage import UsageError
from clients.audio import RATE, AudioSource, open_audio
from clients.audio_source import MediaSource, Meter, Reconnect, url_scheme
from clients.caption import audio_speed
from eval.local_server import free_port
from tests.clients.media import (
    FORMATS,
    encode,
    ffmpeg,
    hls_live,
    needs_ffmpeg,
    rtmp_server,
    served_folder,
    udp_send,
    wait_for,
    write_pcm_wav,
)
from tests.clients.test_audio import _one_line_error, dominant_hz, tone


def pcm_of(source: AudioSource) -> np.ndarray:
    """Everything the source sends, as int16 samples at the client's 16 kHz."""
    return np.frombuffer(b"".join(source.chunks(None, 0.2)), dtype="<i2")


@pytest.fixture(scope="module")
def tone_wav(tmp_path_factory) -> Path:
    """One second of a 440 Hz tone, stereo at 44.1 kHz: every format is made from it."""
    folder = tmp_path_factory.mktemp("tone")
    stereo = np.stack([tone(440, 44100, 1.0), tone(440, 44100, 1.0)], axis=1)
    return write_pcm_wav(folder / "tone.wav", stereo, 44100)


# --- files of any container and codec ------------------------------------------------------

@needs_ffmpeg
@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_every_format_decodes_to_16k_mono(tone_wav, tmp_path, kind) -> None:
    path = encode(tone_wav, kind, tmp_path / f"tone.{kind}")
    source = open_audio(str(path), embedded=False)
    assert source.media is not None and not source.live
    x = pcm_of(source).astype(np.float64)
    # codecs pad with their frame size (AAC 1024 samples, Opus 20 ms): about one second
    assert abs(len(x) / RATE - 1.0) <= 0.1, len(x)
    assert abs(dominant_hz(x, RATE) - 440) <= 3
    assert source.meter.position_s == pytest.approx(len(x) / RATE)
    assert source.meter.duration_s
    if kind != "mkv":  # Matroska's streams carry no length: the container's is shown
        assert source.meter.duration_s == pytest.approx(1.0, abs=0.1)  # the sound's


def test_a_wav_still_goes_through_the_wav_reader(tone_wav) -> None:
    source = open_audio(str(tone_wav), embedded=False)
    assert source.reader is not None and source.media is None
    assert source.meter.duration_s == pytest.approx(1.0)


@needs_ffmpeg
def test_a_wav_the_reader_refuses_is_decoded_by_ffmpeg(tone_wav, tmp_path) -> None:
    mulaw = tmp_path / "mulaw.wav"
    ffmpeg("-i", str(tone_wav), "-c:a", "pcm_mulaw", str(mulaw))
    source = open_audio(str(mulaw), embedded=False)
    assert source.media is not None
    assert abs(dominant_hz(pcm_of(source).astype(np.float64), RATE) - 440) <= 3


@needs_ffmpeg
def test_a_video_track_longer_than_its_sound_is_not_decoded(tone_wav, tmp_path) -> None:
    mp4 = tmp_path / "long-video.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=96x64:rate=10:duration=5", "-i", str(tone_wav),
           "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-c:a", "aac", str(mp4))
    source = open_audio(str(mp4), embedded=False)
    assert abs(len(pcm_of(source)) / RATE - 1.0) <= 0.1


@needs_ffmpeg
def test_an_hour_of_silence_holds_bounded_memory(tmp_path) -> None:
    """The decoder streams: nothing accumulates (an hour at 16 kHz would be 115 MB)."""
    hour = tmp_path / "hour.mp3"
    ffmpeg("-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "3600", "-c:a", "libmp3lame",
           "-b:a", "8k", str(hour))
    source = open_audio(str(hour), embedded=False)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    try:
        sent = sum(len(chunk) for chunk in source.chunks(None, 0.2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sent / 2 / RATE == pytest.approx(3600, abs=1)
    assert peak < 8 * 2**20, peak
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 64 * 2**10
    assert source.meter.level_dbfs == -math.inf  # silence, shown as such


# --- bad input: one UsageError line, before the server is contacted -----------------------

@needs_ffmpeg
def test_bad_inputs_are_one_usage_error(tone_wav, tmp_path) -> None:
    video = tmp_path / "no-sound.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=96x64:rate=10:duration=1", "-c:v", "libx264",
           str(video))
    corrupt = tmp_path / "corrupt.m4a"
    corrupt.write_bytes(np.random.default_rng(1).bytes(20000))
    truncated = tmp_path / "truncated.mp4"  # the moov atom at the end is cut off
    truncated.write_bytes(encode(tone_wav, "m4a").read_bytes()[:4000])
    port = free_port()  # nothing listens there
    cases = {
        str(video): "no audio stream (its streams: video)",
        str(corrupt): "nor any other audio FFmpeg reads",
        str(truncated): "nor any other audio FFmpeg reads",
        f"rtmp://127.0.0.1:{port}/live/x": "cannot open the source (Connection refused)",
        f"http://127.0.0.1:{port}/live.m3u8": "cannot open the source (Connection refused)",
        "gopher+x://host/x": "does not read gopher+x://",
        str(tmp_path / "missing.opus"): "no such file",
    }
    with served_folder(tmp_path / "empty") as base:  # a web server without that stream
        cases[f"{base}/live.m3u8"] = "cannot open the source (Server returned 404 Not Found)"
        for spec, expected in cases.items():
            with pytest.raises(UsageError) as err:
                open_audio(spec, embedded=False, timeout_s=5)
            message = str(err.value)
            assert expected in message and "\n" not in message, message
            assert spec in message


def test_without_pyav_only_wavs_and_stdin_are_read(tone_wav, tmp_path, monkeypatch) -> None:
    import clients.audio_source

    monkeypatch.setattr(clients.audio_source, "av", None)
    assert open_audio(str(tone_wav), embedded=False).reader is not None
    (tmp_path / "talk.m4a").write_bytes(b"not read at all")
    for spec in (str(tmp_path / "talk.m4a"), "rtmp://encoder/live/x"):
        with pytest.raises(UsageError, match=r"needs PyAV: pip install 'livetrans\[clients\]'"):
            open_audio(spec, embedded=False)


@pytest.mark.parametrize("scheme", ["nosuch", "srt"])
def test_a_protocol_pyav_lacks_is_named_with_a_relay_hint(scheme) -> None:
    """SRT is in Debian's ffmpeg but not in PyAV 18.1's wheels (docs/speech.md, "Audio
    sources"): the user is told to relay it through a protocol the client reads."""
    try:
        MediaSource(f"{scheme}://127.0.0.1:{free_port()}", timeout_s=2).open().close()
    except UsageError as exc:
        assert f"does not read {scheme}://; relay it" in str(exc), (
            f"PyAV {av.__version__} may read {scheme}:// now: update docs/speech.md's "
            f"protocol table ({exc})")
    else:
        pytest.fail(f"{scheme}:// opened")


@needs_ffmpeg
def test_bad_inputs_from_the_cli_are_one_line_and_exit_2(tmp_path) -> None:
    video = tmp_path / "no-sound.mkv"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=96x64:rate=10:duration=1", "-c:v", "libx264",
           str(video))
    (tmp_path / "corrupt.mp3").write_bytes(b"\xff\xfb" + bytes(range(256)) * 40)
    port = free_port()
    _one_line_error(["--audio", str(video)], "no audio stream")
    _one_line_error(["--audio", str(tmp_path / "corrupt.mp3")], "corrupt.mp3")
    _one_line_error(["--audio", f"rtmp://127.0.0.1:{port}/live/x"], "cannot open the source")
    _one_line_error(["--audio", "nosuch://host/x"], "does not read nosuch://")
    _one_line_error(["--audio", str(video), "--realtime", "--fast"], "--realtime")
    _one_line_error(["--audio", "-", "--source-timeout", "0"], "--source-timeout")


# --- live sources on loopback --------------------------------------------------------------

@pytest.fixture(scope="module")
def speech_m4a(tmp_path_factory) -> Path:
    """Two seconds of a tone with a pause: a short live talk (no espeak needed here)."""
    folder = tmp_path_factory.mktemp("live")
    x = np.concatenate([tone(300, 22050, 1.0), np.zeros(22050), tone(600, 22050, 1.0)])
    wav = write_pcm_wav(folder / "talk.wav", x, 22050)
    return encode(wav, "m4a")


@needs_ffmpeg
def test_a_live_hls_stream_is_read_to_its_end(speech_m4a, tmp_path) -> None:
    notes: list[str] = []
    with hls_live(speech_m4a, tmp_path / "hls") as producer, \
            served_folder(tmp_path / "hls") as base:
        source = open_audio(f"{base}/live.m3u8", embedded=False, notify=notes.append)
        assert source.live
        x = pcm_of(source)  # ends at #EXT-X-ENDLIST: HTTP's end of stream is the talk's
        assert producer.wait(60) == 0
    assert abs(len(x) / RATE - 3.0) <= 0.2, len(x) / RATE
    assert notes == [] and source.meter.reconnects == 0


@needs_ffmpeg
def test_an_hls_stream_that_stalls_and_resumes_is_sent_once(tmp_path) -> None:
    """The producer freezes mid-talk (SIGSTOP) and resumes: FFmpeg ends a playlist that
    stopped growing, which is no #EXT-X-ENDLIST, so the client reopens it, and skips the
    segments it had sent already: every second of the talk arrives once."""
    x = np.concatenate([tone(300, 22050, 3.0), np.zeros(22050), tone(600, 22050, 3.0)])
    talk = encode(write_pcm_wav(tmp_path / "talk.wav", x, 22050), "m4a")
    notes: list[str] = []
    folder = tmp_path / "hls"
    with hls_live(talk, folder) as producer, served_folder(folder) as base:
        source = MediaSource(f"{base}/live.m3u8", RATE, timeout_s=2, notify=notes.append,
                             reconnect=Reconnect(first_s=0.2, give_up_s=60)).open()

        def stall() -> None:
            wait_for(lambda: (folder / "live.m3u8").read_text().count(".ts") >= 2,
                     "two segments")
            producer.send_signal(signal.SIGSTOP)
            wait_for(lambda: any("reopening" in n for n in notes), "the drop")
            producer.send_signal(signal.SIGCONT)

        thread = threading.Thread(target=stall, daemon=True)
        thread.start()
        pcm = np.frombuffer(b"".join(source.blocks()), dtype="<i2").astype(np.float64)
        thread.join(60)
        producer.send_signal(signal.SIGCONT)  # whatever happened above
        assert producer.wait(60) == 0
    assert source.meter.reconnects >= 1, notes
    assert abs(len(pcm) / RATE - 7.0) <= 0.3, (len(pcm) / RATE, notes)
    assert abs(dominant_hz(pcm[: 2 * RATE], RATE) - 300) <= 3
    assert abs(dominant_hz(pcm[-2 * RATE:], RATE) - 600) <= 3


@needs_ffmpeg
def test_an_rtmp_source_that_ends_is_retried_then_given_up(speech_m4a) -> None:
    notes: list[str] = []
    port = free_port()
    with rtmp_server(speech_m4a, port):
        source = open_audio(f"rtmp://127.0.0.1:{port}/live/talk", embedded=False,
                            notify=notes.append, reconnect=Reconnect(first_s=0.2, give_up_s=1))
        x = pcm_of(source)
    assert abs(len(x) / RATE - 3.0) <= 0.2, len(x) / RATE
    assert "the source dropped" in notes[0] and "the talk ends here" in notes[-1]


@needs_ffmpeg
def test_a_udp_source_that_stops_and_comes_back_is_reopened(speech_m4a) -> None:
    """The sender stops mid-talk: no packet for the timeout is a drop; the client reopens
    and reads the sender that comes back, then gives up when it is gone for good."""
    notes: list[str] = []
    url = f"udp://127.0.0.1:{free_port()}"
    reopening = threading.Event()

    def note(message: str) -> None:
        notes.append(message)
        if "reopening" in message:
            reopening.set()

    def senders() -> None:
        udp_send(speech_m4a, url).wait(60)
        reopening.wait(60)
        udp_send(speech_m4a, url).wait(60)

    thread = threading.Thread(target=senders, daemon=True)
    source = MediaSource(url, RATE, timeout_s=2, notify=note,
                         reconnect=Reconnect(first_s=0.2, give_up_s=3))
    thread.start()  # the receiver binds within its open; packets before that are lost
    source.open()
    sent = sum(len(b) for b in source.blocks()) / 2 / RATE
    thread.join(60)
    assert source.meter.reconnects >= 1, notes
    assert sent > 3.0, (sent, notes)  # more than the first sender's talk: the second's too
    assert "the talk ends here" in notes[-1]


# --- the reconnect policy, without waiting ---------------------------------------------------

class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_backoff_doubles_to_its_ceiling_then_gives_up(monkeypatch) -> None:
    clock = _FakeClock()
    notes: list[str] = []
    source = MediaSource("rtmp://encoder/live/x", reconnect=Reconnect(0.5, 4.0, 20.0),
                         notify=notes.append, sleep=clock.sleep, clock=lambda: clock.now)

    def refused() -> None:
        raise av.error.ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(source, "_open", refused)
    source._reopen("the stream ended")
    assert clock.slept == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]  # 19.5 s; 4 more pass 20
    assert source._container is None and "the talk ends here" in notes[-1]
    assert all("Connection refused" in n for n in notes[1:-1])


def test_a_source_that_comes_back_resets_the_state(monkeypatch) -> None:
    clock = _FakeClock()
    source = MediaSource("udp://127.0.0.1:5000", notify=lambda m: None, sleep=clock.sleep,
                         clock=lambda: clock.now)
    answers = iter([av.error.ExitError(1414092869, "Immediate exit requested"), ("c", "s")])

    def flaky() -> tuple[str, str]:
        answer = next(answers)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    monkeypatch.setattr(source, "_open", flaky)
    source._reopen("nothing arrived for 10 s")
    assert (source._container, source._stream) == ("c", "s")
    assert source.meter.reconnects == 1 and source.meter.state == ""
    source._container = None


# --- what is shown, and pacing ------------------------------------------------------------

def test_meter_line_shows_progress_level_and_reconnects() -> None:
    meter = Meter(live=False, duration_s=10.0)
    meter.add((np.ones(RATE, dtype="<i2") * 3277).tobytes(), RATE)  # 1 s at -20 dBFS
    assert meter.line().startswith("1.0 s / 10.0 s (10%)")
    assert "-20 dBFS" in meter.line()
    live = Meter(live=True, reconnects=2, state="source dropped, reopening in 1 s")
    assert live.line().startswith("live 0.0 s") and "silence" in live.line()
    assert "reconnected 2x" in live.line() and "reopening in 1 s" in live.line()


def test_only_realtime_paces_a_file() -> None:
    args = argparse.Namespace(speed=2.0, realtime=False)
    assert audio_speed(args) is None  # as fast as the server takes it (API "Where events
    args.realtime = True  # happen"), unless --realtime
    assert audio_speed(args) == 2.0


def test_url_schemes_tell_urls_from_paths() -> None:
    assert url_scheme("rtmp://host/app") == "rtmp"
    assert url_scheme("HTTPS://cdn/x.m3u8") == "https"
    assert url_scheme("srt://host:9000?mode=caller") == "srt"
    assert url_scheme("talk.m4a") is None and url_scheme("C:/talk.wav") is None
    assert url_scheme("-") is None


def test_a_live_source_is_never_paced_by_the_client(monkeypatch) -> None:
    import clients.audio as audio

    media = MediaSource("udp://127.0.0.1:9")
    monkeypatch.setattr(media, "blocks", lambda: iter([b"\x00\x00" * 3200]))
    source = AudioSource("udp", None, None, media, media.meter)
    speeds: list[float | None] = []
    real = audio.paced

    def spy(chunks, speed, rate=RATE):  # noqa: ANN001, ANN202
        speeds.append(speed)
        return real(chunks, speed, rate)

    monkeypatch.setattr(audio, "paced", spy)
    assert len(b"".join(source.chunks(1.0, 0.2))) == 6400
    assert speeds == [None] and source.meter.position_s == pytest.approx(0.2)


def test_cancel_ends_a_reconnect_wait_at_once(monkeypatch) -> None:
    """Ctrl-C on a live source that is away: the default wait is the cancel event."""
    source = MediaSource("rtmp://encoder/live/x", notify=lambda m: None)
    opened: list[bool] = []
    monkeypatch.setattr(source, "_open", lambda: opened.append(True))
    source.cancel()
    source._reopen("the stream ended")  # would wait 0.5 s, then try: neither happens
    assert opened == [] and source._container is None


def test_the_caption_view_redraws_the_meter_above_the_captions() -> None:
    """The meter moves between captions: the live view renders it again on each refresh."""
    import io

    from rich.console import Console

    from clients.caption import CaptionView

    console = Console(file=io.StringIO(), width=100, force_terminal=False)
    meter = Meter(live=True)
    view = CaptionView(console, enabled=True, langs=["de"], show_source="en", meter=meter)
    first = view._render()
    meter.add((np.ones(RATE // 5, dtype="<i2") * 3277).tobytes(), RATE)
    view.current["de"] = {"source": "Hello every", "display_text": "Hallo"}
    console.print(view._render())
    shown = [line.rstrip() for line in console.file.getvalue().splitlines()]
    assert shown[0].startswith("live 0.2 s") and "-20 dBFS" in shown[0]
    assert shown[1:] == ["Hello every", "de: Hallo"]
    assert first.row_count == 1  # the meter alone before any caption


def test_a_reopened_hls_stream_skips_only_what_was_sent() -> None:
    from fractions import Fraction
    from types import SimpleNamespace

    def frame(start_s: float) -> SimpleNamespace:  # 1024 samples at 48 kHz, 90 kHz clock
        return SimpleNamespace(pts=round(start_s * 90000), time_base=Fraction(1, 90000),
                               samples=1024, sample_rate=48000)

    source = MediaSource("http://cdn/live.m3u8")
    times = [100 + i * 1024 / 48000 for i in range(10)]
    assert not any(source._already_sent(frame(t)) for t in times)
    source._skip_until = source._sent_until  # as a reopen does
    assert [source._already_sent(frame(t)) for t in times[5:]] == [True] * 5
    assert not source._already_sent(frame(times[-1] + 1024 / 48000))  # new audio: sent
    assert source._skip_until is None
    source._skip_until = source._sent_until
    assert not source._already_sent(frame(1.4))  # a producer that restarted its clock


def test_credentials_in_a_url_are_never_shown() -> None:
    port = free_port()
    with pytest.raises(UsageError) as err:
        open_audio(f"rtmp://speaker:s3cret@127.0.0.1:{port}/live/x", embedded=False)
    assert "s3cret" not in str(err.value)
    assert f"rtmp://***@127.0.0.1:{port}/live/x" in str(err.value)
