# Two commands matter: `make serve` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup serve test lint bench clean system-deps web-deps

setup: $(STAMP)

# llama-cpp-python compiles from source the first time (~7 min on 2 cores); pip's wheel
# cache makes later installs fast. For CUDA: CMAKE_ARGS="-DGGML_CUDA=on" make setup
# On x86-64 the native build leaves out llama.cpp's AMX kernels, which crash on the default
# model (app/engine/llama_build.py); an AMX build already installed is rebuilt without them.
ifeq ($(shell uname -m),x86_64)
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
endif
LLAMA_PIN := $(shell grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)
BUILD_FLAGS := CFLAGS="$(NO_AMX) $$CFLAGS" CXXFLAGS="$(NO_AMX) $$CXXFLAGS"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip wheel
	$(BUILD_FLAGS) $(BIN)/python -m pip install -e ".[dev]"
	$(BIN)/python -m app.engine.llama_build || $(BUILD_FLAGS) $(BIN)/python -m pip install \
	  --no-cache-dir --force-reinstall --no-deps "$(LLAMA_PIN)"
	$(BIN)/python -m app.engine.llama_build
	touch $(STAMP)

# Not echoed: livetrans's own lines are all there is to read. A failed start is one line
# from livetrans and exit code 2; GNU make then adds its own "make: *** [serve] Error 2"
# line (it always reports a failed recipe, and exits 2): .venv/bin/livetrans serve, run
# directly, prints only livetrans's line and exits with its code.
serve: setup
	@$(BIN)/livetrans serve $(ARGS)

lint: setup
	$(BIN)/ruff check .

# The browser test drives Debian's Chromium, the scale-out test Debian's nginx, the room-bus
# tests Debian's redis-server and redis-sentinel (the failover test) and the
# speech-to-captions test and the voices Debian's espeak-ng (a speech synthesiser), the audio-source and
# HLS tests Debian's ffmpeg (it encodes test audio and video, and reads the subtitle
# playlists as a player would); the caption-screen screenshots need a Japanese font
# (fonts-ipafont-gothic); without root or apt they are skipped, not failed.
system-deps:
	@command -v chromium >/dev/null 2>&1 && command -v nginx >/dev/null 2>&1 && \
	  command -v espeak-ng >/dev/null 2>&1 && command -v redis-server >/dev/null 2>&1 && \
	  command -v redis-sentinel >/dev/null 2>&1 && command -v ffmpeg >/dev/null 2>&1 && \
	  [ -d /usr/share/fonts/opentype/ipafont-gothic ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      chromium nginx-light espeak-ng redis-server redis-sentinel ffmpeg fonts-ipafont-gothic; \
	  else echo "chromium/nginx/espeak-ng/redis-server/redis-sentinel/ffmpeg missing: the browser, scale-out," \
	    "room-bus and speech tests" \
	    "will be skipped"; fi; }

# hls.js (npm registry) for the HLS player test in Chromium; without npm that test is skipped.
web-deps:
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/web --no-audit --no-fund --silent; \
	  else echo "npm missing: the hls.js player test will be skipped"; fi

test: setup system-deps web-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -rs $(PYTEST_ARGS)

bench: setup
	$(BIN)/livetrans bench engine

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
