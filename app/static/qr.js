"use strict";
// A room's audience QR codes (GET /v1/rooms/{room}/qr), shared by the operator page (/live)
// and the printable page (/live/print). The code is fetched rather than linked from an
// <img>, so the page also gets the link the code holds (X-Livetrans-Link: under the
// server's public URL, which the page cannot know) and the server's reason on a refusal.
// The SVG is shown through an <img> of a blob URL: never parsed into the page's markup.

const QR_LANG_NAMES = {de: "Deutsch", fr: "Français", es: "Español", it: "Italiano",
                       pt: "Português", uk: "Українська", ru: "Русский", zh: "中文",
                       ja: "日本語", en: "English"};

function qrUrl(room, lang, token) {
  const q = new URLSearchParams({lang});
  if (token) q.set("token", token);
  return `/v1/rooms/${encodeURIComponent(room)}/qr?${q}`;
}

// {src, link} of the code for `lang` in `room`; an Error with the server's message (and
// `.status`, `.code`) when it refuses.
async function loadQr(room, lang, token) {
  const resp = await fetch(qrUrl(room, lang, token), {cache: "no-store"});
  if (!resp.ok) {
    let message = `HTTP ${resp.status}`, code = "";
    try {
      const body = await resp.json();
      message = String(body.error.message || message);
      code = String(body.error.code || "");
    } catch { /* not the server's JSON */ }
    const err = new Error(message);
    err.status = resp.status; err.code = code;
    throw err;
  }
  const blob = await resp.blob();
  // a room viewer token's expiry (unix seconds): codes printed ahead say until when
  const expires = Number(resp.headers.get("X-Livetrans-Expires")) || 0;
  return {src: URL.createObjectURL(blob), link: resp.headers.get("X-Livetrans-Link") || "",
          expires};
}

// A <figure> for one language: the code, the language's name, the link as text.
function qrFigure(lang, qr) {
  const fig = document.createElement("figure");
  fig.className = "qr";
  fig.dataset.lang = lang;
  const img = document.createElement("img");
  img.src = qr.src;
  img.alt = `QR code: live captions in ${QR_LANG_NAMES[lang] || lang}`;
  img.dataset.lang = lang;
  img.dataset.link = qr.link;
  const cap = document.createElement("figcaption");
  const name = document.createElement("strong");
  name.textContent = QR_LANG_NAMES[lang] || lang;
  name.lang = lang;
  const link = document.createElement("span");
  link.className = "qr-link";
  link.textContent = qr.link;
  cap.append(name, link);
  fig.append(img, cap);
  return fig;
}
