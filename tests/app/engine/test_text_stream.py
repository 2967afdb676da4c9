from app.engine.text_stream import TextStream


def test_multibyte_characters_are_never_split() -> None:
    data = "天気".encode()
    stream = TextStream()
    out = [stream.feed(data[i : i + 1]) for i in range(len(data))]
    assert out[:2] == ["", ""] and "".join(out) + stream.finish() == "天気"


def test_stop_string_cuts_and_holds_back() -> None:
    stream = TextStream(stop_strings=("\nEnglish:",))
    assert stream.feed(b" Hallo") == " Hallo"
    assert stream.feed(b"\nEng") == ""  # might be the start of the stop string
    assert stream.feed(b"lish: more") == ""
    assert stream.stopped and stream.text == " Hallo"


def test_held_back_text_is_released_when_it_is_not_a_stop() -> None:
    stream = TextStream(stop_strings=("\n\n",))
    assert stream.feed(b"a\n") == "a"
    assert stream.feed(b"b") == "\nb"
    assert stream.finish() == ""


def _stream(pieces: list[str], **stops) -> str:
    stream = TextStream(**stops)
    out = "".join(stream.feed(p.encode()) for p in pieces) + stream.finish()
    assert out == stream.text
    return stream.text


def test_a_client_stop_never_matches_the_leading_whitespace() -> None:
    """stop=[" "] used to end every answer before its first word (outputs start with a
    space); a client's stop now matches from the first non-space character on."""
    pieces = [" Guten", " Tag", ",", " liebe", " Leute", "."]
    assert _stream(pieces, client_stops=(" ",)) == " Guten"
    assert _stream(pieces, client_stops=("\n", " ")) == " Guten"
    assert _stream([" ", " ", "\n", "Hallo", "\n", "x"], client_stops=("\n",)) == "  \nHallo"
    assert _stream(pieces, client_stops=("Tag",)) == " Guten "
    # the prompt's own stops still match anywhere
    assert _stream(["\n", "English:"], stop_strings=("\n",)) == ""
    assert _stream(pieces, client_stops=("   ",)) == " Guten Tag, liebe Leute."
