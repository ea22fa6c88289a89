package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
)

// Registrar is dynamic client registration as the registration endpoint calls it
// (registration.Registrar); an interface here so the package links none of its rules.
type Registrar interface {
	Register(ctx context.Context, token string, body []byte) (map[string]any, error)
	Read(ctx context.Context, clientID, token string) (map[string]any, error)
	Replace(ctx context.Context, clientID, token string, body []byte) (map[string]any, error)
	Delete(ctx context.Context, clientID, token string) error
}

// MaxRegistrationBodyBytes bounds a registration's body (registration.MaxBodyBytes).
const MaxRegistrationBodyBytes = 64 << 10

// RegisterHandler serves dynamic client registration (RFC 7591) at PathRegister (POST) and
// its management (RFC 7592) at PathRegister/{client_id} (GET, PUT, DELETE). The token comes
// as Bearer in the Authorization header only; bodies are JSON of at most
// MaxRegistrationBodyBytes. Refusals of a token carry RFC 6750's challenge.
type RegisterHandler struct {
	Registrar Registrar
	Log       *slog.Logger
}

func (h *RegisterHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, management := strings.CutPrefix(r.URL.Path, PathRegister+"/")
	switch {
	case r.URL.Path == PathRegister:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
	case management && id != "" && !strings.Contains(id, "/"):
		if r.Method != http.MethodGet && r.Method != http.MethodPut && r.Method != http.MethodDelete {
			methodNotAllowed(w, "GET, PUT, DELETE")
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	token, err := authorizer.BearerToken(r.Header.Get("Authorization"))
	if err != nil && err != authorizer.ErrNoToken {
		h.refuse(w, r, err)
		return
	}
	var body []byte
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		if body, err = readRegistrationBody(w, r); err != nil {
			h.refuse(w, r, err)
			return
		}
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodPost:
		out, err := h.Registrar.Register(ctx, token, body)
		h.answer(w, r, http.StatusCreated, out, err)
	case http.MethodGet:
		out, err := h.Registrar.Read(ctx, id, token)
		h.answer(w, r, http.StatusOK, out, err)
	case http.MethodPut:
		out, err := h.Registrar.Replace(ctx, id, token, body)
		h.answer(w, r, http.StatusOK, out, err)
	case http.MethodDelete:
		if err := h.Registrar.Delete(ctx, id, token); err != nil {
			h.refuse(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *RegisterHandler) answer(w http.ResponseWriter, r *http.Request, status int, out map[string]any, err error) {
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	writeJSON(w, status, out)
}

// refuse answers an error; a refused token gets the Bearer challenge (RFC 6750 3).
func (h *RegisterHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if e := oauth.AsError(err); e.Code == oauth.ErrCodeInvalidToken {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	writeError(w, r, h.Log, err)
}

// readRegistrationBody reads a JSON body of at most MaxRegistrationBodyBytes.
func readRegistrationBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, oauth.InvalidRequest("the body must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRegistrationBodyBytes))
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return nil, oauth.InvalidClientMetadata("the request is larger than %d bytes", MaxRegistrationBodyBytes)
	}
	if err != nil {
		return nil, oauth.InvalidRequest("the body could not be read")
	}
	return body, nil
}
