package httpapi

import (
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/pages"
)

// AssetsHandler serves the pages' stylesheet from memory.
type AssetsHandler struct {
	Pages *pages.Pages
}

func (h *AssetsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if !strings.HasSuffix(r.URL.Path, "/app.css") {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/css; charset=utf-8")
	hd.Set("Cache-Control", "public, max-age=86400")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("ETag", h.Pages.CSSTag)
	if r.Header.Get("If-None-Match") == h.Pages.CSSTag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(h.Pages.CSS)
}
