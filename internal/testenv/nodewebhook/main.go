// Command nodewebhook is a validating admission webhook backend for the test environment's real node
// (internal/testenv, node.go): it serves HTTPS on :8443 with the certificate and key in /tls (tls.crt, tls.key, a
// Secret volume), admits every object but those named "rejected-by-webhook" on /validate, and answers 200 on
// /healthz (the readiness probe). It is built statically at test time and packed into an image, never pulled; the
// standard library only, so it builds in seconds.
package main

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// rejectName is the object name the webhook denies, so a denial proves the apiserver called it.
const rejectName = "rejected-by-webhook"

// review is the part of an admission.k8s.io/v1 AdmissionReview the webhook reads and writes.
type review struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    *reviewRequest  `json:"request,omitempty"`
	Response   *reviewResponse `json:"response,omitempty"`
}

type reviewRequest struct {
	UID  string `json:"uid"`
	Name string `json:"name"`
}

type reviewResponse struct {
	UID     string  `json:"uid"`
	Allowed bool    `json:"allowed"`
	Status  *status `json:"status,omitempty"`
}

type status struct {
	Message string `json:"message"`
}

func validate(w http.ResponseWriter, r *http.Request) {
	var rev review
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&rev); err != nil || rev.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &reviewResponse{UID: rev.Request.UID, Allowed: rev.Request.Name != rejectName}
	if !resp.Allowed {
		resp.Status = &status{Message: "denied by the syncmedic test webhook on the node"}
	}
	rev.Request, rev.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rev)
}

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", validate)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := &http.Server{Addr: ":8443", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.ListenAndServeTLS("/tls/tls.crt", "/tls/tls.key"); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
