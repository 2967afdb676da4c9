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


def test_an_answer_stop_ends_only_a_begun_answer() -> None:
    """An instruction model's blank line ends its answer, but not after a lead-in: "Here
    is the translation:\\n\\n" goes on to the translation (cleaned off later)."""
    answer = ["Wir", " können", ".", "\n\n", "In German, the translation is:", " \"Wir k"]
    assert _stream(answer, answer_stops=("\n\n",)) == "Wir können."
    lead_in = ["Here is the translation:", "\n\n", "Guten", " Morgen", ".", "\n\n", "Note"]
    assert _stream(lead_in, answer_stops=("\n\n",)) == \
        "Here is the translation:\n\nGuten Morgen."
    assert _stream(["\n\n", "Hallo", "\n\n", "x"], answer_stops=("\n\n",)) == "\n\nHallo"


def test_the_caller_says_what_a_lead_in_is() -> None:
    """The translator knows lead-ins by their words ("Here is the German translation"
    with no colon); the engine asks it."""
    pieces = ["Here is the German translation", "\n", "Guten Morgen.", "\n", "Note"]
    assert _stream(pieces, answer_stops=("\n",)) == "Here is the German translation"
    assert _stream(pieces, answer_stops=("\n",),
                   answer_begun=lambda before: "Guten" in before) == \
        "Here is the German translation\nGuten Morgen."
