package deploy

// The security of every build (docs/security.md): the gRPC port serves TLS
// from a mounted Secret and requires bearer tokens from another, the files
// the flags name are in those Secrets, the mounts are ones the kubelet
// updates when the Secrets rotate (never subPath) and that the non-root
// server can read, and cert-manager's objects, where a build has them,
// decode strictly, issue the Secret the pods mount, name the Service's DNS
// names in the build's namespace and chain to an issuer of the build.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
)

// secretFile finds the Secret and key that `path` comes from in container
// c: a Secret volume mounted (whole, read-only) at the file's directory that
// projects the file's name.
func secretFile(c *corev1.Container, pod *corev1.PodSpec, path string) (*corev1.SecretVolumeSource, error) {
	dir, name := filepath.Split(path)
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(dir) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret == nil {
				return nil, fmt.Errorf("%s is mounted from volume %s, which is not a Secret", dir, v.Name)
			}
			if m.SubPath != "" || m.SubPathExpr != "" {
				return nil, fmt.Errorf("%s is a subPath mount of Secret %s: the kubelet never updates it, so a rotated Secret would not reach the server", dir, v.Secret.SecretName)
			}
			if !m.ReadOnly {
				return nil, fmt.Errorf("Secret %s is mounted writable at %s", v.Secret.SecretName, dir)
			}
			if v.Secret.Optional != nil && *v.Secret.Optional {
				return nil, fmt.Errorf("Secret %s is optional: without it the server would not start (or, worse, start without it)", v.Secret.SecretName)
			}
			// Secret files belong to root with the pod's fsGroup; the server
			// runs as neither, so group (or other) must be able to read.
			mode := int32(0o644)
			if v.Secret.DefaultMode != nil {
				mode = *v.Secret.DefaultMode
			}
			projected := len(v.Secret.Items) == 0
			for _, item := range v.Secret.Items {
				if item.Path == name {
					projected = true
					if item.Mode != nil {
						mode = *item.Mode
					}
				}
			}
			if !projected {
				return nil, fmt.Errorf("Secret %s mounted at %s does not project %s", v.Secret.SecretName, dir, name)
			}
			if mode&0o044 == 0 {
				return nil, fmt.Errorf("Secret %s mode %#o: the server (uid %s) cannot read %s", v.Secret.SecretName, mode, "65532", path)
			}
			if pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil {
				return nil, fmt.Errorf("the pod has no fsGroup, so the server cannot read Secret %s", v.Secret.SecretName)
			}
			return v.Secret, nil
		}
	}
	return nil, fmt.Errorf("no volume is mounted at %s", dir)
}

func checkSecurity(t *testing.T, objs *Objects, c *corev1.Container, pod *corev1.PodSpec, effective map[string]string) {
	t.Helper()
	dir := objs.Dir
	secrets := map[string]*corev1.SecretVolumeSource{}
	for _, flag := range []string{"tls_cert_file", "tls_key_file", "tls_client_ca_file", "auth_token_file"} {
		path := effective[flag]
		if path == "" {
			if flag != "tls_client_ca_file" {
				t.Errorf("%s: --%s is not set; every build serves TLS with bearer tokens (docs/security.md)", dir, flag)
			}
			continue
		}
		secret, err := secretFile(c, pod, path)
		if err != nil {
			t.Errorf("%s: --%s=%s: %v", dir, flag, path, err)
			continue
		}
		secrets[flag] = secret
	}
	cert, key := secrets["tls_cert_file"], secrets["tls_key_file"]
	if cert != nil && key != nil && cert.SecretName != key.SecretName {
		t.Errorf("%s: the certificate comes from Secret %s and its key from %s; a rotation would pair them wrong", dir, cert.SecretName, key.SecretName)
	}
	if ca := secrets["tls_client_ca_file"]; ca != nil && cert != nil && ca.SecretName != cert.SecretName {
		t.Logf("%s: client CA from Secret %s, certificate from %s", dir, ca.SecretName, cert.SecretName)
	}
	if cert != nil {
		checkCertManager(t, objs, cert.SecretName, secrets["tls_client_ca_file"] != nil)
	}
}

// checkCertManager: where the build has cert-manager objects, one
// Certificate writes the TLS Secret, for the Service's names in the
// build's namespace, signed by an Issuer of the build.
func checkCertManager(t *testing.T, objs *Objects, tlsSecret string, mtls bool) {
	t.Helper()
	dir := objs.Dir
	if strings.Contains(dir, "with-cert-manager") && (len(objs.Certificates) == 0 || len(objs.Issuers) == 0) {
		t.Fatalf("%s: want cert-manager Certificates and Issuers, got %d and %d", dir, len(objs.Certificates), len(objs.Issuers))
	}
	if len(objs.Certificates) == 0 {
		return
	}
	issuers := map[string]*certmanagerv1.Issuer{}
	for _, i := range objs.Issuers {
		issuers[i.Name] = i
	}
	byName := map[string]*certmanagerv1.Certificate{}
	var server *certmanagerv1.Certificate
	for _, cert := range objs.Certificates {
		byName[cert.Name] = cert
		ref := cert.Spec.IssuerRef
		if ref.Kind != "Issuer" && ref.Kind != "" {
			continue // a ClusterIssuer lives outside the build
		}
		if _, ok := issuers[ref.Name]; !ok {
			t.Errorf("%s: Certificate %s names Issuer %s, which the build does not contain", dir, cert.Name, ref.Name)
		}
		if cert.Spec.SecretName == tlsSecret {
			if server != nil {
				t.Errorf("%s: Certificates %s and %s both write Secret %s", dir, server.Name, cert.Name, tlsSecret)
			}
			server = cert
		}
	}
	if server == nil {
		t.Errorf("%s: no Certificate writes Secret %s, which the pods mount", dir, tlsSecret)
		return
	}
	if !slices.Contains(server.Spec.Usages, certmanagerv1.UsageServerAuth) {
		t.Errorf("%s: Certificate %s lacks the usage %q", dir, server.Name, certmanagerv1.UsageServerAuth)
	}
	if len(objs.Services) == 1 && server.Namespace != "" {
		svc := objs.Services[0]
		domain := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, server.Namespace)
		for _, want := range []string{domain, "*." + domain} {
			if !slices.Contains(server.Spec.DNSNames, want) {
				t.Errorf("%s: Certificate %s does not name %s (clients of Service %s in namespace %s dial it); its names: %v",
					dir, server.Name, want, svc.Name, server.Namespace, server.Spec.DNSNames)
			}
		}
	}
	// A CA issuer's Secret comes from an isCA Certificate of the build; then
	// the server's Secret carries that CA as ca.crt, which mTLS reads.
	issuer := issuers[server.Spec.IssuerRef.Name]
	if issuer != nil && issuer.Spec.CA != nil {
		caCert := (*certmanagerv1.Certificate)(nil)
		for _, cert := range objs.Certificates {
			if cert.Spec.SecretName == issuer.Spec.CA.SecretName {
				caCert = cert
			}
		}
		if caCert == nil || !caCert.Spec.IsCA {
			t.Errorf("%s: Issuer %s signs with Secret %s, which no isCA Certificate of the build writes", dir, issuer.Name, issuer.Spec.CA.SecretName)
		}
	} else if mtls {
		t.Errorf("%s: mTLS reads ca.crt from Secret %s, but its issuer is not a CA issuer of the build", dir, tlsSecret)
	}
}
