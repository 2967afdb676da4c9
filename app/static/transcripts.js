// Transcript downloads, shared by the operator page (/live) and the caption screen (/watch):
// GET /v1/rooms/{room}/transcript (API.md "Transcripts"). A link carries the talk's viewer
// token, never an API key. A click fetches the file instead of following the link, so a
// refusal (no transcript yet, a token for another talk) is shown on the page, not saved.
"use strict";

function transcriptUrl(room, lang, format, token) {
  const q = new URLSearchParams({lang, format});
  if (token) q.set("token", token);
  return `/v1/rooms/${encodeURIComponent(room)}/transcript?${q}`;
}

// The click handler of a download link: onError(message) is told what went wrong.
function transcriptDownloader(onError) {
  return async function (ev) {
    ev.preventDefault();
    const link = ev.currentTarget;
    try {
      const r = await fetch(link.href, {cache: "no-store"});
      if (!r.ok) {
        let why = `HTTP ${r.status}`;
        try { why = (await r.json()).error.message || why; } catch { /* not JSON */ }
        onError(why);
        return;
      }
      const url = URL.createObjectURL(await r.blob());
      const a = document.createElement("a");
      a.href = url; a.download = link.download;
      document.body.appendChild(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 30000);
    } catch {
      onError("the server cannot be reached");
    }
  };
}
