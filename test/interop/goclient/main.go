// The interop suite's Go client: net/http over golang.org/x/net/http2's Transport, h2c with prior
// knowledge on http:// (AllowHTTP and a plain TCP dial), h2 by ALPN on https:// (the CA given).
// Reads the cases (JSON: name, method, path, headers, body in base64), sends each `repeat` times on
// one connection, and prints one JSON line per answer: status, body in base64, the trailers (gRPC's
// grpc-status), or the error net/http returned (a stream reset before END_STREAM is one).
//
//	goclient CASES.json BASE_URL [CA.pem]
//
// `goclient slow URL BODY_FILE UPLOAD_SECONDS` (h2c, net/http's own HTTP/2 with 64 KiB receive
// windows) instead uploads BODY_FILE as JSON, paced over UPLOAD_SECONDS, prints "started" when the
// first byte of the body is asked for, reads the answer at 1.5 MB/s, then prints one JSON line with
// the body's length and sha256 (what the drain test needs; Go's client keeps sending a stream the
// server's GOAWAY let through, as RFC 9113 §6.8 wants).
//
// `goclient early URL` (h2c) declares a 1 MiB body, sends 1 KiB of it and holds the rest until the
// answer has been read whole: the server answers while the body is still arriving, and may then
// stop it with RST_STREAM NO_ERROR (RFC 9113 §8.1), never before its END_STREAM. Prints the
// answer as above.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

type testCase struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Repeat  int               `json:"repeat"`
}

type answer struct {
	Name     string            `json:"name"`
	I        int               `json:"i"`
	Status   int               `json:"status,omitempty"`
	Proto    string            `json:"version,omitempty"`
	Body     string            `json:"body"`
	Trailers map[string]string `json:"trailers,omitempty"`
	Error    string            `json:"error,omitempty"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "slow" {
		slow(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "early" {
		early(os.Args[2])
		return
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		panic(err)
	}
	base := os.Args[2]
	transport := &http2.Transport{}
	if len(os.Args) > 3 {
		pem, err := os.ReadFile(os.Args[3])
		if err != nil {
			panic(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	} else {
		transport.AllowHTTP = true
		transport.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
	client := &http.Client{Transport: transport, Timeout: 20 * time.Second}
	out := json.NewEncoder(os.Stdout)
	for _, c := range cases {
		repeat := c.Repeat
		if repeat < 1 {
			repeat = 1
		}
		for i := 0; i < repeat; i++ {
			a := answer{Name: c.Name, I: i}
			if err := send(client, base, c, &a); err != nil {
				a.Error = err.Error()
			}
			if err := out.Encode(a); err != nil {
				panic(err)
			}
		}
	}
}

func send(client *http.Client, base string, c testCase, a *answer) error {
	body, err := base64.StdEncoding.DecodeString(c.Body)
	if err != nil {
		return err
	}
	var reader io.Reader
	if len(body) > 0 {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequest(c.Method, base+c.Path, reader)
	if err != nil {
		return err
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	a.Status = res.StatusCode
	a.Proto = res.Proto
	a.Body = base64.StdEncoding.EncodeToString(got)
	if err != nil {
		return fmt.Errorf("reading the body after %d bytes: %w", len(got), err)
	}
	if len(res.Trailer) > 0 {
		a.Trailers = map[string]string{}
		for k := range res.Trailer {
			a.Trailers[k] = res.Trailer.Get(k)
		}
	}
	return nil
}

// pacedReader hands out its bytes in 64 KiB pieces spread over `total`.
type pacedReader struct {
	data    []byte
	sent    int
	start   time.Time
	total   time.Duration
	started sync.Once
}

func (p *pacedReader) Read(b []byte) (int, error) {
	p.started.Do(func() {
		p.start = time.Now()
		fmt.Println("started")
	})
	if p.sent >= len(p.data) {
		return 0, io.EOF
	}
	due := p.start.Add(time.Duration(float64(p.total) * float64(p.sent) / float64(len(p.data))))
	time.Sleep(time.Until(due))
	n := copy(b[:min(len(b), 64*1024)], p.data[p.sent:])
	p.sent += n
	return n, nil
}

type slowAnswer struct {
	Status int    `json:"status,omitempty"`
	Proto  string `json:"version,omitempty"`
	Length int    `json:"length"`
	SHA256 string `json:"sha256,omitempty"`
	Done   bool   `json:"complete"`
	Error  string `json:"error,omitempty"`
}

func slow(url, bodyFile, seconds string) {
	body, err := os.ReadFile(bodyFile)
	if err != nil {
		panic(err)
	}
	s, err := strconv.ParseFloat(seconds, 64)
	if err != nil {
		panic(err)
	}
	// net/http's own HTTP/2 (h2c by prior knowledge), with 64 KiB receive windows: the server
	// holds the rest of the answer until this client reads it, at slowReadRate.
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	transport := &http.Transport{Protocols: &protocols, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
	}}
	req, err := http.NewRequest("POST", url, &pacedReader{data: body, total: time.Duration(s * float64(time.Second))})
	if err != nil {
		panic(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	a := slowAnswer{}
	res, err := (&http.Client{Transport: transport, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		a.Error = err.Error()
	} else {
		got, err := readSlowly(res.Body)
		res.Body.Close()
		a.Status = res.StatusCode
		a.Proto = res.Proto
		a.Length = len(got)
		sum := sha256.Sum256(got)
		a.SHA256 = fmt.Sprintf("%x", sum)
		a.Done = err == nil
		if err != nil {
			a.Error = err.Error()
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(a); err != nil {
		panic(err)
	}
}

// slowReadRate is how fast `slow` reads its answer (bytes/s).
const slowReadRate = 1.5 * 1024 * 1024

func readSlowly(r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 32<<10)
	start := time.Now()
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		time.Sleep(time.Until(start.Add(time.Duration(float64(len(out)) / slowReadRate * float64(time.Second)))))
	}
}

func early(url string) {
	transport := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	r, w := io.Pipe()
	req, err := http.NewRequest("POST", url, r)
	if err != nil {
		panic(err)
	}
	req.ContentLength = 1 << 20
	req.Header.Set("Content-Type", "application/json")
	go func() { _, _ = w.Write(make([]byte, 1024)) }()
	a := answer{}
	res, err := (&http.Client{Transport: transport, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		a.Error = err.Error()
	} else {
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		a.Status = res.StatusCode
		a.Proto = res.Proto
		a.Body = base64.StdEncoding.EncodeToString(got)
		if err != nil {
			a.Error = fmt.Sprintf("reading the body after %d bytes: %s", len(got), err)
		}
	}
	w.CloseWithError(io.ErrClosedPipe)
	if err := json.NewEncoder(os.Stdout).Encode(a); err != nil {
		panic(err)
	}
}
