// Package brokertls holds the mutual TLS of a credential broker's admin
// API over TCP (a broker in a cluster): a certificate authority of the
// user's own, the broker's server certificate and the client certificate
// boxctl presents, each pair in a directory of its own as a Kubernetes
// TLS Secret holds them (ca.crt, tls.crt, tls.key), and the tls.Configs
// that use them: TLS 1.3 only, the server taking clients of the CA only.
package brokertls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files of a directory of certificates (Server, Client), as a
// Kubernetes TLS Secret names them.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// The directories Write makes under its output directory, and the CA's
// own key beside them (needed only to issue more certificates).
const (
	Server  = "server"
	Client  = "client"
	CAKey   = "ca.key"
	caCName = "boxctl broker CA"
)

// DefaultHosts are the names a broker's admin API answers as in a cluster
// (its Service in namespace ns) and through a port-forward.
func DefaultHosts(ns, service string) []string {
	return []string{service, service + "." + ns, service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local",
		"localhost", "127.0.0.1"}
}

// ExistsError is Write into a directory that already holds certificates.
type ExistsError struct{ Path string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("brokertls: %s exists: remove it, or write the certificates elsewhere", e.Path)
}

// Write makes a new CA in dir (its key in dir/ca.key), a server
// certificate for hosts (DNS names or IP addresses) in dir/server and a
// client certificate in dir/client, valid for valid from now; keys are
// ECDSA P-256 and files holding one are mode 0600. A dir already holding
// any of them is a *ExistsError: nothing is replaced.
func Write(dir string, hosts []string, valid time.Duration) error {
	if len(hosts) == 0 {
		return errors.New("brokertls: the server certificate needs a host")
	}
	if valid <= 0 {
		return errors.New("brokertls: the certificates need a validity")
	}
	for _, p := range []string{CAKey, Server, Client} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return &ExistsError{Path: filepath.Join(dir, p)}
		}
	}
	now := time.Now().Add(-time.Minute)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: caCName}, NotBefore: now,
		NotAfter: now.Add(valid), IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	srv := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]}, NotBefore: now, NotAfter: now.Add(valid),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			srv.IPAddresses = append(srv.IPAddresses, ip)
		} else {
			srv.DNSNames = append(srv.DNSNames, h)
		}
	}
	cli := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "boxctl"}, NotBefore: now, NotAfter: now.Add(valid),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, CAKey), caKey); err != nil {
		return err
	}
	for sub, tmpl := range map[string]*x509.Certificate{Server: srv, Client: cli} {
		if err := issue(filepath.Join(dir, sub), tmpl, ca, caKey, caDER); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// issue writes tmpl's certificate signed by ca, its new key and the CA's
// certificate into dir.
func issue(dir string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, caDER []byte) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, KeyFile), key); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, CertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, CAFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// load reads dir's key pair and CA pool.
func load(dir string) (tls.Certificate, *x509.CertPool, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("brokertls: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("brokertls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, fmt.Errorf("brokertls: %s holds no certificate", filepath.Join(dir, CAFile))
	}
	return pair, pool, nil
}

// ServerConfig is the admin API's TLS from dir (a Server directory): its
// certificate, and only clients with a certificate of its CA.
func ServerConfig(dir string) (*tls.Config, error) {
	pair, pool, err := load(dir)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13}, nil
}

// ClientConfig is boxctl's TLS towards the admin API from dir (a Client
// directory): its certificate, and only a server of its CA.
func ClientConfig(dir string) (*tls.Config, error) {
	pair, pool, err := load(dir)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}
