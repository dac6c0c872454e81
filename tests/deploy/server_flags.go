// Package deploy checks the Kubernetes manifests, the kubelet examples and
// the container image recipe in deploy/ against the server they deploy.
//
// This file reads what the server accepts: the flags service/main.cc
// defines (name, C++ type, default) and, when a built furrballs_server is
// at hand, the names its --help lists.
package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// ServerFlag is one ABSL_FLAG of service/main.cc.
type ServerFlag struct {
	Name    string
	Type    string // the C++ type: std::string, uint64_t, int, uint32_t, bool, std::optional<uint64_t>
	Default string // the C++ default expression, e.g. "127.0.0.1:50051" or 1 << 20
}

// RepoRoot is the repository's top directory (two levels above this file).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ABSL_FLAG(type, name, default, "help..."): the default is everything up
// to the comma that precedes the help string.
var abslFlag = regexp.MustCompile(`(?s)ABSL_FLAG\(\s*([\w:<>]+)\s*,\s*(\w+)\s*,\s*(.*?)\s*,\s*"`)

// ParseServerFlags reads the flags defined in service/main.cc (the only
// flags the server applies from FURRBALLS_<NAME> variables and flag files).
func ParseServerFlags(mainCC string) (map[string]ServerFlag, error) {
	src, err := os.ReadFile(mainCC)
	if err != nil {
		return nil, err
	}
	flags := map[string]ServerFlag{}
	for _, m := range abslFlag.FindAllStringSubmatch(string(src), -1) {
		def := strings.TrimSpace(m[3])
		if strings.HasPrefix(def, `"`) && strings.HasSuffix(def, `"`) {
			def = strings.Trim(def, `"`)
		}
		flags[m[2]] = ServerFlag{Name: m[2], Type: m[1], Default: def}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("%s defines no ABSL_FLAG", mainCC)
	}
	return flags, nil
}

// A flag entry of Abseil's --helpfull, which may span several lines:
//
//	--name (help text); default: value;
var helpFlag = regexp.MustCompile(`(?s)^--(\w+) \((.*)\); default: (.*);$`)

// HelpFlags runs `server --helpfull` and returns the flags it lists under
// service/main.cc (Abseil groups flags by the file that defines them), with
// their defaults as printed (strings unquoted). --helpfull rather than
// --help: with Debian's Abseil, --help of this binary matches no flags.
func HelpFlags(server string) (map[string]string, error) {
	out, _ := exec.Command(server, "--helpfull").CombinedOutput()
	text := string(out)
	start := strings.Index(text, "Flags from service/main.cc:")
	if start < 0 {
		return nil, fmt.Errorf("%s --helpfull lists no flags of service/main.cc:\n%s", server, text)
	}
	section := text[start:]
	// It ends at the next file's flags or at the blank line after the list.
	if end := strings.Index(section[1:], "Flags from "); end >= 0 {
		section = section[:end+1]
	}
	if end := strings.Index(section, "\n\n"); end >= 0 {
		section = section[:end]
	}
	flags := map[string]string{}
	// Entries start at a line indented by four spaces and a "--".
	for _, entry := range strings.Split(section, "\n    --")[1:] {
		entry = "--" + strings.Join(strings.Fields(entry), " ")
		if m := helpFlag.FindStringSubmatch(entry); m != nil {
			flags[m[1]] = strings.Trim(m[3], `"`)
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no flag entries parsed from %s --helpfull", server)
	}
	return flags, nil
}
