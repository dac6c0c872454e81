package deploy

// Runs the built server (FURRBALLS_SERVER) with each build's flag file, as
// the pod would, and checks what only the real process can tell: that it
// accepts every flag and starts, that what it maps stays inside --memory_mb
// (so that the pod's memory limit holds), and that SIGTERM brings it down
// within the pod's grace period.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The memory budget the test starts each configuration with: small enough
// for CI, large enough that the memory line has a few MiB of precision.
const probeMemoryMB = 256

var (
	servingLine = regexp.MustCompile(`serving furrballs\.v1\.Cache on 127\.0\.0\.1:(\d+)`)
	memoryLine  = regexp.MustCompile(`(\d+) MiB per node, mapped (\d+) MiB of (\d+) MiB budget`)
)

func TestFlagFilesStartTheServer(t *testing.T) {
	server := os.Getenv("FURRBALLS_SERVER")
	if server == "" {
		t.Skip("FURRBALLS_SERVER is not set; tools/test.sh sets it to the built //service:furrballs_server")
	}
	flags := serverFlags(t)
	for _, dir := range furrballsBuilds {
		t.Run(strings.ReplaceAll(dir, "/", "_"), func(t *testing.T) {
			objs := build(t, dir)
			sts := objs.StatefulSets[0]
			c := &sts.Spec.Template.Spec.Containers[0]
			effective, _ := effectiveFlags(t, objs, c, &sts.Spec.Template.Spec, flags)
			var flagFile string
			for name, cm := range objs.ConfigMaps {
				if strings.HasPrefix(name, "furrballs-flags") {
					flagFile = cm.Data["flags"]
				}
			}
			path := filepath.Join(t.TempDir(), "flags")
			if err := os.WriteFile(path, []byte(flagFile), 0o644); err != nil {
				t.Fatal(err)
			}
			// Loopback on a free port, no metrics listener, a small budget,
			// and stand-ins for the Secrets' files; every other flag comes
			// from the pod's flag file.
			args := []string{"--flagfile=" + path, "--listen_address=127.0.0.1:0",
				"--metrics_address=", "--memory_mb=" + strconv.Itoa(probeMemoryMB)}
			args = append(args, secretStandIns(t, effective)...)
			cmd := exec.Command(server, args...)
			cmd.Env = os.Environ()
			if _, ok := flags["data_dir"]; ok {
				cmd.Env = append(cmd.Env, "FURRBALLS_DATA_DIR="+t.TempDir())
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()

			lines := make(chan string, 100)
			go func() {
				scanner := bufio.NewScanner(stdout)
				for scanner.Scan() {
					lines <- scanner.Text()
				}
				close(lines)
			}()
			var output []string
			var mappedMiB, budgetMiB uint64
			started := false
			timeout := time.After(60 * time.Second)
			for !started {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatalf("the server exited before serving with %s's flags:\n%s", dir, strings.Join(output, "\n"))
					}
					output = append(output, line)
					if m := memoryLine.FindStringSubmatch(line); m != nil {
						mappedMiB, _ = strconv.ParseUint(m[2], 10, 64)
						budgetMiB, _ = strconv.ParseUint(m[3], 10, 64)
					}
					started = servingLine.MatchString(line)
				case <-timeout:
					t.Fatalf("the server did not serve within 60 s:\n%s", strings.Join(output, "\n"))
				}
			}
			if budgetMiB != probeMemoryMB || mappedMiB == 0 {
				t.Errorf("no \"mapped M MiB of %d MiB budget\" line in:\n%s", probeMemoryMB, strings.Join(output, "\n"))
			}
			// The engine's own accounting: everything it maps (values,
			// key table, ARC, spill buffers) is inside --memory_mb, so the
			// pod needs the budget plus the process's headroom.
			if mappedMiB > budgetMiB {
				t.Errorf("%s: the server mapped %d MiB for a %d MiB budget", dir, mappedMiB, budgetMiB)
			}
			memoryMB, _ := strconv.ParseUint(effective["memory_mb"], 10, 64)
			need := memoryMB<<20 + processHeadroom
			limit := c.Resources.Limits[corev1.ResourceMemory]
			t.Logf("%s: --memory_mb=%d: mapped %d of %d MiB at the probe budget; needs %d MiB, limit %s",
				dir, memoryMB, mappedMiB, budgetMiB, need>>20, limit.String())
			if uint64(limit.Value()) < need {
				t.Errorf("%s: memory limit %s < --memory_mb=%d MiB + %d MiB = %d MiB",
					dir, limit.String(), memoryMB, processHeadroom>>20, need>>20)
			}

			// SIGTERM: drain, deadline, exit 0, all inside what the pod
			// grants after its preStop hook.
			grace := time.Duration(*sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				grace -= time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			}
			begin := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			go func() {
				for line := range lines {
					output = append(output, line)
				}
			}()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				took := time.Since(begin)
				t.Logf("%s: stopped %.1f s after SIGTERM (grace after preStop: %s)", dir, took.Seconds(), grace)
				if err != nil {
					t.Errorf("the server exited with %v after SIGTERM", err)
				}
			case <-time.After(grace):
				t.Errorf("%s: the server was still running %s after SIGTERM; the kubelet would SIGKILL it", dir, grace)
			}
		})
	}
}

// secretStandIns: the flags that point the server at a certificate, key,
// client CA and token file made here, for each of those files the build
// mounts from a Secret, and a free port for its health listener.
func secretStandIns(t *testing.T, effective map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "furrballs deploy test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"tls_cert_file":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls_key_file":       pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		"tls_client_ca_file": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"auth_token_file":    []byte("read-write deploy-test-0123456789abcdef\n"),
	}
	var args []string
	for flag, content := range files {
		if effective[flag] == "" {
			continue
		}
		file := filepath.Join(dir, flag)
		if err := os.WriteFile(file, content, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--"+flag+"="+file)
	}
	if effective["health_address"] != "" {
		args = append(args, "--health_address=127.0.0.1:0")
	}
	return args
}
