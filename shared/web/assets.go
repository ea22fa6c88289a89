package web

import (
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/pages"
)

// AssetsHandler serves the pages' stylesheet and their one script (passkey.js) from memory.
type AssetsHandler struct {
	Pages *pages.Pages
}

func (h *AssetsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var body []byte
	var tag, typ string
	switch {
	case strings.HasSuffix(r.URL.Path, "/app.css"):
		body, tag, typ = h.Pages.CSS, h.Pages.CSSTag, "text/css; charset=utf-8"
	case strings.HasSuffix(r.URL.Path, "/passkey.js"):
		body, tag, typ = h.Pages.Script, h.Pages.ScriptTag, "text/javascript; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", typ)
	hd.Set("Cache-Control", "public, max-age=86400")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("ETag", tag)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(body)
}
