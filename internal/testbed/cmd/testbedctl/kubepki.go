package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// certValidity is how long the test bed's certificates last; renewMargin
// is how close to its end a certificate is made again.
const (
	certValidity = 10 * 365 * 24 * time.Hour
	renewMargin  = 30 * 24 * time.Hour
)

// certSpec is one certificate of the test bed's Kubernetes, signed by its
// CA: a P-256 key in NAME.key (PKCS #8) and the certificate in NAME.crt.
type certSpec struct {
	name string
	cn   string
	org  string
	eku  x509.ExtKeyUsage
	dns  []string
	ips  []netip.Addr
}

// kubeCerts are the certificates of a cluster whose one node is node and
// whose `kubernetes` Service has the address serviceIP.
func kubeCerts(node string, serviceIP netip.Addr) []certSpec {
	loop := netip.MustParseAddr("127.0.0.1")
	return []certSpec{
		{name: "apiserver", cn: "kube-apiserver", eku: x509.ExtKeyUsageServerAuth,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []netip.Addr{loop, serviceIP}},
		{name: "kubelet", cn: node, eku: x509.ExtKeyUsageServerAuth, dns: []string{node}, ips: []netip.Addr{loop}},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", org: "system:masters", eku: x509.ExtKeyUsageClientAuth},
		{name: "admin", cn: "boxctl-testbed-admin", org: "system:masters", eku: x509.ExtKeyUsageClientAuth},
		{name: "controller-manager", cn: "system:kube-controller-manager", eku: x509.ExtKeyUsageClientAuth},
		{name: "scheduler", cn: "system:kube-scheduler", eku: x509.ExtKeyUsageClientAuth},
		{name: "node", cn: "system:node:" + node, org: "system:nodes", eku: x509.ExtKeyUsageClientAuth},
		{name: "agent-sandbox", cn: "agent-sandbox-controller", org: "system:masters", eku: x509.ExtKeyUsageClientAuth},
	}
}

// serviceIP is the first address of the service CIDR: the `kubernetes`
// Service's.
func serviceIP(cidr string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return netip.Addr{}, fmt.Errorf("service CIDR %q: want an IPv4 prefix", cidr)
	}
	ip := p.Masked().Addr().Next()
	if !p.Contains(ip) {
		return netip.Addr{}, fmt.Errorf("service CIDR %q holds no address", cidr)
	}
	return ip, nil
}

// kubePKI makes the PKI in -dir unless it holds one that matches the specs
// already: the CA, every certificate (signed by the CA, with its subject,
// usage and names, not near its end) and the service account key pair.
// A new one is made in DIR.tmp and then replaces DIR.
func kubePKI(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("kube-pki", flag.ContinueOnError)
	dir := fs.String("dir", "", "the PKI directory")
	node := fs.String("node", "localhost", "the node's name")
	cidr := fs.String("service-cidr", "", "the service CIDR; its first address is the apiserver's Service")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *cidr == "" {
		return fmt.Errorf("kube-pki needs -dir and -service-cidr: %w", flag.ErrHelp)
	}
	ip, err := serviceIP(*cidr)
	if err != nil {
		return err
	}
	specs := kubeCerts(*node, ip)
	now := time.Now()
	if err := checkPKI(*dir, specs, now); err == nil {
		return nil
	}
	tmp := *dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	if err := makePKI(tmp, specs, now); err != nil {
		return err
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, *dir); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "made the PKI in %s\n", *dir)
	return err
}

// makePKI writes a new CA, every certificate and the service account key
// pair into dir.
func makePKI(dir string, specs []certSpec, now time.Time) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: "boxctl-testbed-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePair(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	for _, s := range specs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          randSerial(),
			Subject:               s.subject(),
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(certValidity),
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:           []x509.ExtKeyUsage{s.eku},
			DNSNames:              s.dns,
		}
		for _, ip := range s.ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", s.name, err)
		}
		if err := writePair(dir, s.name, der, key); err != nil {
			return err
		}
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func (s certSpec) subject() pkix.Name {
	n := pkix.Name{CommonName: s.cn}
	if s.org != "" {
		n.Organization = []string{s.org}
	}
	return n
}

func randSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func writePair(dir, name string, der []byte, key crypto.Signer) error {
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// readCert reads the PEM certificate at path.
func readCert(path string) (*x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(raw)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return x509.ParseCertificate(b.Bytes)
}

// checkPKI reports why dir does not hold the PKI of specs (nil when it
// does), whoever made it.
func checkPKI(dir string, specs []certSpec, now time.Time) error {
	ca, err := readCert(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	if !ca.IsCA || now.Add(renewMargin).After(ca.NotAfter) {
		return errors.New("the CA is no CA or ends soon")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range []string{"ca.key", "sa.key", "sa.pub"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	for _, s := range specs {
		c, err := readCert(filepath.Join(dir, s.name+".crt"))
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, s.name+".key")); err != nil {
			return err
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{s.eku}, CurrentTime: now}); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		var ips []netip.Addr
		for _, ip := range c.IPAddresses {
			a, _ := netip.AddrFromSlice(ip)
			ips = append(ips, a.Unmap())
		}
		if c.Subject.CommonName != s.cn || !slices.Equal(c.Subject.Organization, s.subject().Organization) ||
			!sameSet(c.DNSNames, s.dns) || !sameSet(ips, s.ips) || now.Add(renewMargin).After(c.NotAfter) {
			return fmt.Errorf("%s: subject, names or validity differ", s.name)
		}
	}
	return nil
}

func sameSet[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// kubeconfig writes the kubeconfig of one client of the cluster: the CA,
// the client's certificate and key (USER.crt, USER.key in the PKI), the
// apiserver's URL; the file is rewritten only when its content changes,
// since the daemons that read it restart when it does.
func kubeconfig(args []string) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	pki := fs.String("pki", "", "the PKI directory")
	server := fs.String("server", "", "the apiserver's URL")
	user := fs.String("user", "", "the client: USER.crt and USER.key in the PKI")
	out := fs.String("out", "", "the kubeconfig to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pki == "" || *server == "" || *user == "" || *out == "" {
		return fmt.Errorf("kubeconfig needs -pki, -server, -user and -out: %w", flag.ErrHelp)
	}
	files := map[string][]byte{}
	for _, name := range []string{"ca.crt", *user + ".crt", *user + ".key"} {
		b, err := os.ReadFile(filepath.Join(*pki, name))
		if err != nil {
			return err
		}
		files[name] = b
	}
	content := renderKubeconfig(*server, *user, files["ca.crt"], files[*user+".crt"], files[*user+".key"])
	return writeIfChanged(*out, content, 0o600)
}

// renderKubeconfig is the kubeconfig text of one client.
func renderKubeconfig(server, user string, ca, cert, key []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	var b bytes.Buffer
	fmt.Fprintf(&b, `# written by scripts/testbed
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: testbed
  context:
    cluster: testbed
    user: %s
    namespace: default
current-context: testbed
`, server, b64(ca), user, b64(cert), b64(key), user)
	return b.Bytes()
}

// writeIfChanged writes content to path unless the file holds exactly
// that; either way the file ends with mode perm.
func writeIfChanged(path string, content []byte, perm os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return os.Chmod(path, perm)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
