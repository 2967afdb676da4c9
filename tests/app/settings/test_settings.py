"""Settings from flags and ``LIVETRANS_*`` variables: lists, choices, one-line errors."""

from __future__ import annotations

import pytest

from app.settings import Settings, SettingsError, load_settings


@pytest.mark.parametrize("raw, expected", [
    ("a,b", ["a", "b"]),
    (" a , b ,, ", ["a", "b"]),
    ("single", ["single"]),
    ('["a", "b"]', ["a", "b"]),
    ("", []),
])
def test_list_settings_take_comma_separated_env_values(monkeypatch, raw, expected) -> None:
    monkeypatch.setenv("LIVETRANS_API_KEYS", raw)
    assert Settings().auth.api_keys == expected


def test_cors_origins_from_env(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_CORS_ORIGINS", "https://a.example/,http://localhost:3000")
    assert Settings().http.cors_origins == ["https://a.example", "http://localhost:3000"]
    monkeypatch.setenv("LIVETRANS_CORS_ORIGINS", "a.example")
    with pytest.raises(SettingsError, match=r"--cors-origin .*'a.example' is not an origin"):
        load_settings()


def test_no_cross_origin_and_no_metrics_key_by_default(monkeypatch) -> None:
    for name in ("CORS_ORIGINS", "METRICS_KEY", "API_KEYS"):
        monkeypatch.delenv(f"LIVETRANS_{name}", raising=False)
    s = Settings()
    assert s.http.cors_origins == [] and s.auth.metrics_key is None and s.auth.api_keys == []


@pytest.mark.parametrize("name, value, choices", [
    ("omp_wait_policy", "fast", "'auto', 'active' or 'passive'"),
    ("prompt_format", "foo", "'few-shot', 'chat-template', 'chat-generic'"),
    ("log_level", "loud", "'critical', 'error', 'warning', 'info' or 'debug'"),
])
def test_fixed_choices_are_checked_with_the_choices_in_the_message(name, value,
                                                                   choices) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(**{name: value})
    message = str(info.value)
    flag = "--" + name.replace("_", "-")
    assert flag in message and f"LIVETRANS_{name.upper()}" in message and choices in message
    assert "\n" not in message


def test_choices_are_case_insensitive(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("LIVETRANS_OMP_WAIT_POLICY", "Passive")
    s = load_settings(prompt_format="Chat-Template")
    assert (s.logs.level, s.omp_wait_policy, s.prompt_format) == \
        ("debug", "passive", "chat-template")


def test_bad_numbers_are_one_line(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_PORT", "eighty")
    with pytest.raises(SettingsError, match=r"^invalid --port \(LIVETRANS_PORT\) \(got 'eighty'\)"):
        load_settings()
    with pytest.raises(SettingsError, match="--max-body-bytes"):
        load_settings(port=1, max_body_bytes=10)


def test_missing_files_are_named(tmp_path) -> None:
    with pytest.raises(SettingsError, match="--api-key-file .*no such file"):
        load_settings(api_key_file=tmp_path / "keys.txt").check_files()
    with pytest.raises(SettingsError, match="--dict-dir .*no such folder"):
        load_settings(dict_dir=tmp_path / "dicts").check_files()
    (tmp_path / "keys.txt").write_text("k1\n# comment\n\nk2\n")
    s = load_settings(api_key_file=tmp_path / "keys.txt")
    s.check_files()
    assert s.auth.all_api_keys() == {"k1", "k2"}


def test_langs_from_flags_and_env(monkeypatch) -> None:
    """``serve --langs en,de`` (``LIVETRANS_LANGS``): normalised, in order; none by default."""
    monkeypatch.delenv("LIVETRANS_LANGS", raising=False)
    assert Settings().languages.langs == [] and Settings().languages.no_trim is False
    monkeypatch.setenv("LIVETRANS_LANGS", "EN, de")
    monkeypatch.setenv("LIVETRANS_NO_TRIM", "1")
    s = load_settings()
    assert s.languages.langs == ["en", "de"] and s.languages.no_trim is True


@pytest.mark.parametrize("langs, expected", [
    (["en,xx"], "Unsupported language 'xx'. Supported: de, en"),
    (["en,de,EN"], "'en' is named twice"),
    (["de"], "only 'de' is named"),
])
def test_bad_langs_are_one_line(langs, expected) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(langs=langs)
    message = str(info.value)
    assert "--langs" in message and "LIVETRANS_LANGS" in message and expected in message
    assert "\n" not in message


def test_corpus_files_are_checked(tmp_path) -> None:
    text = tmp_path / "de.txt"
    text.write_text("Guten Morgen.\n", encoding="utf-8")
    s = load_settings(langs=["en,de"], corpus=[f"DE={text}"])
    s.check_files()
    assert s.languages.corpus_files() == [("de", text)]
    for corpus, expected in ((["de"], "is not LANG=FILE"), (["xx=a"], "'xx'")):
        with pytest.raises(SettingsError, match=f"--corpus .*{expected}"):
            load_settings(langs=["en,de"], corpus=corpus)
    for langs, corpus, expected in ((["en,ja"], f"de={text}", "de is not in --langs"),
                                    ([], f"de={text}", "none given"),
                                    (["en,de"], f"de={tmp_path / 'no.txt'}", "no such file")):
        with pytest.raises(SettingsError, match=f"--corpus .*{expected}"):
            load_settings(langs=langs, corpus=[corpus]).check_files()


def test_voices_are_lang_equals_onnx_once_per_language(tmp_path) -> None:
    s = load_settings(voices=["DE=voices/de.onnx"], voice_engine=" Espeak-NG ")
    assert s.voice.voices == ["de=voices/de.onnx"] and s.voice.engine == "espeak-ng"
    assert Settings().voice.voices == [] and Settings().voice.engine == "auto"
    for voices, expected in ((["de"], "is not LANG=PATH.onnx"), (["xx=a.onnx"], "'xx'"),
                             (["de=a.onnx,de=b.onnx"], "two voices")):
        with pytest.raises(SettingsError, match=f"--voice .*{expected}"):
            load_settings(voices=voices)
    with pytest.raises(SettingsError, match="--voice-engine .*'piper'"):
        load_settings(voice_engine="festival")
    model = tmp_path / "de.onnx"
    model.write_bytes(b"")
    with pytest.raises(SettingsError, match=r"--voice .*no such file: .*de\.onnx\.json"):
        load_settings(voices=[f"de={model}"]).check_files()
    (tmp_path / "de.onnx.json").write_text("{}")
    load_settings(voices=[f"de={model}"]).check_files()
