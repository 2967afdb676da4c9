"""``start``'s ``outputs``: every bad field is one refusal naming it (no model)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.live.frames import encode_frame
from app.live.messages import Refusal, parse_start_targets
from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import MAX_OUTPUTS, OutputError, parse_outputs

POLICY = HostPolicy.from_entries(["upload.youtube.com", "*.example.org", "127.0.0.1"])
YT = {"type": "youtube", "url": "http://upload.youtube.com/closedcaption?cid=K", "lang": "de"}
HOOK = {"type": "webhook", "url": "https://hooks.example.org/in", "lang": "ja",
        "secret": "s3cret"}


def start(outputs: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "start", "target_langs": ["de", "ja"], "room": "keynote-1",
            "outputs": outputs, **fields}


def test_good_outputs_are_parsed_in_order() -> None:
    begun, targets, _ = parse_start_targets(start([YT, {**HOOK, "lang": "JA"}]), POLICY)
    assert targets == ["de", "ja"]
    yt, hook = begun.pushes
    assert (yt.index, yt.type, yt.lang, yt.host, yt.secret) == \
        (0, "youtube", "de", "upload.youtube.com", None)
    assert (hook.index, hook.type, hook.lang, hook.secret) == (1, "webhook", "ja", "s3cret")
    assert "s3cret" not in repr(hook)  # a secret is never shown


def test_lang_may_be_left_out_with_one_target_only() -> None:
    one, _, _ = parse_start_targets({"type": "start", "target_lang": "de", "room": "r",
                                     "outputs": [{k: v for k, v in YT.items()
                                                  if k != "lang"}]}, POLICY)
    assert one.pushes[0].lang == "de"
    with pytest.raises(Refusal) as exc:
        parse_start_targets(start([{k: v for k, v in YT.items() if k != "lang"}]), POLICY)
    assert exc.value.param == "outputs[0].lang"


def test_no_outputs_and_an_empty_list_are_nothing() -> None:
    assert parse_start_targets(start(None), POLICY)[0].pushes == []
    assert parse_start_targets(start([]), POLICY)[0].pushes == []


@pytest.mark.parametrize(("outputs", "param", "code"), [
    ("http://x", "outputs", "invalid_message"),
    ([YT] * (MAX_OUTPUTS + 1), "outputs", "invalid_message"),
    ([YT, "x"], "outputs[1]", "invalid_message"),
    ([{**YT, "type": "rtmp"}], "outputs[0].type", "invalid_message"),
    ([{**YT, "type": None}], "outputs[0].type", "invalid_message"),
    ([YT, {**HOOK, "url": "ftp://hooks.example.org/in"}], "outputs[1].url",
     "invalid_message"),
    ([{**YT, "url": "file:///etc/passwd"}], "outputs[0].url", "invalid_message"),
    ([{**YT, "url": "javascript:alert(1)"}], "outputs[0].url", "invalid_message"),
    ([{**YT, "url": 5}], "outputs[0].url", "invalid_message"),
    ([{**YT, "url": ""}], "outputs[0].url", "invalid_message"),
    ([{**YT, "url": "http://upload.youtube.com/" + "a" * 3000}], "outputs[0].url",
     "invalid_message"),
    ([{**YT, "url": "http://upload.youtube.com/a b"}], "outputs[0].url", "invalid_message"),
    ([{**YT, "url": "http://upload.youtube.com/\ud800"}], "outputs[0].url",
     "invalid_message"),
    ([{**YT, "url": "http://user:pw@upload.youtube.com/"}], "outputs[0].url",
     "invalid_message"),
    ([{**YT, "url": "http://upload.youtube.com:99999/"}], "outputs[0].url",
     "invalid_message"),
    ([{**YT, "url": "http:///nohost"}], "outputs[0].url", "invalid_message"),
    ([{**YT, "url": "https://evil.example.com/"}], "outputs[0].url", "output_not_allowed"),
    ([{**YT, "url": "http://example.org/"}], "outputs[0].url", "output_not_allowed"),
    ([{**YT, "url": "http://10.0.0.1/"}], "outputs[0].url", "output_not_allowed"),
    ([{**YT, "url": "http://[::1]:8000/"}], "outputs[0].url", "output_not_allowed"),
    ([{**YT, "url": "http://169.254.169.254/latest/meta-data"}], "outputs[0].url",
     "output_not_allowed"),
    ([YT, {**HOOK, "secret": 5}], "outputs[1].secret", "invalid_message"),
    ([{**HOOK, "secret": None}], "outputs[0].secret", "invalid_message"),
    ([{k: v for k, v in HOOK.items() if k != "secret"}], "outputs[0].secret",
     "invalid_message"),
    ([{**HOOK, "secret": ["s"]}], "outputs[0].secret", "invalid_message"),
    ([{**HOOK, "secret": ""}], "outputs[0].secret", "invalid_message"),
    ([{**HOOK, "secret": "\udc00"}], "outputs[0].secret", "invalid_message"),
    ([{**YT, "lang": "fr"}], "outputs[0].lang", "invalid_message"),
    ([{**YT, "lang": "xx\ud800"}], "outputs[0].lang", "invalid_message"),
    ([{**YT, "lang": 7}], "outputs[0].lang", "invalid_message"),
    ([YT, YT], "outputs[1].url", "invalid_message"),
])
def test_each_bad_field_is_one_refusal_naming_it(outputs, param, code) -> None:
    with pytest.raises(Refusal) as exc:
        parse_start_targets(start(outputs), POLICY)
    assert (exc.value.param, exc.value.code) == (param, code)
    assert exc.value.message.startswith(param)
    encode_frame({"message": exc.value.message}).encode("utf-8")  # always sendable


def test_a_refusal_never_repeats_the_url_whole() -> None:
    secret_url = "http://evil.example.com/closedcaption?cid=STREAMKEY-123"
    with pytest.raises(Refusal) as exc:
        parse_start_targets(start([{**YT, "url": secret_url}]), POLICY)
    assert "STREAMKEY" not in exc.value.message and "evil.example.com" in exc.value.message


def test_outputs_need_a_room() -> None:
    with pytest.raises(Refusal) as exc:
        parse_start_targets(start([YT], room=None), POLICY)
    assert exc.value.param == "outputs"


def test_without_a_policy_no_host_is_allowed() -> None:
    with pytest.raises(Refusal) as exc:
        parse_start_targets(start([YT]))
    assert exc.value.code == "output_not_allowed"
    assert "allows no output hosts" in exc.value.message


def test_parse_outputs_alone() -> None:
    specs = parse_outputs([{**YT, "url": YT["url"] + "#frag"}], ["de"], POLICY)
    assert specs[0].url == YT["url"]  # the fragment is never sent
    with pytest.raises(OutputError):
        parse_outputs([{**YT, "url": "http://127.0.0.2/"}], ["de"], POLICY)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=20) | st.sampled_from(["youtube", "webhook", "http://127.0.0.1/x",
                                              "https://a.example.org/", "\ud800", "de"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "url", "lang", "secret", "x"]), inner, max_size=5),
    max_leaves=12)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(outputs=JSON)
def test_any_json_is_parsed_or_refused_naming_a_field(outputs) -> None:
    """Whatever a client sends as ``outputs``: a parse, or one ``Refusal`` whose ``param``
    is ``outputs`` or a field of it and whose message can be sent; never another error."""
    try:
        parse_start_targets(start(outputs), POLICY)
    except Refusal as exc:
        assert exc.param is not None and exc.param.startswith("outputs")
        encode_frame({"message": exc.message}).encode("utf-8")
