package tgmcp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// authServer is a local OAuth authorization server as far as a resource
// server sees one: an issuer that signs JWT access tokens (ES256) and
// publishes its JWK Set over HTTP, written here from RFC 7517 and 7518
// without the library the verifier uses. It can rotate its key.
type authServer struct {
	issuer string
	hits   atomic.Int32 // JWK Set fetches

	mu  sync.Mutex
	key *ecdsa.PrivateKey
	kid string
	n   int
}

// newAuthServer serves an authorization server on 127.0.0.1:port until the
// test ends; nil port means a key pair only, never served (a stranger).
func newAuthServer(t testing.TB, port int) *authServer {
	t.Helper()
	a := &authServer{issuer: fmt.Sprintf("http://127.0.0.1:%d", port)}
	a.rotate(t)
	if port == 0 {
		return a
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		a.mu.Lock()
		pub := a.key.PublicKey
		kid := a.kid
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]string{
			"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
			"x": b64(pub.X.FillBytes(make([]byte, 32))), "y": b64(pub.Y.FillBytes(make([]byte, 32))),
		}}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": a.issuer, "jwks_uri": a.jwksURL(),
			"authorization_endpoint": a.issuer + "/authorize", "token_endpoint": a.issuer + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	})
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return a
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (a *authServer) jwksURL() string { return a.issuer + "/jwks" }

// rotate replaces the signing key (and its kid).
func (a *authServer) rotate(t testing.TB) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	a.key, a.kid = k, fmt.Sprintf("key-%d", a.n)
}

// claims are an access token's claims for audience aud, subject sub of
// tenant, with scopes, valid for an hour.
func (a *authServer) claims(aud, sub, tenant string, scopes string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": a.issuer, "aud": aud, "sub": sub, "tenant": tenant, "scope": scopes,
		"client_id": "test-client", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// sign signs claims with the current key.
func (a *authServer) sign(t testing.TB, c jwt.MapClaims) string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = a.kid
	s, err := tok.SignedString(a.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

var errNoTenant = errors.New("no tenant claim")
