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
