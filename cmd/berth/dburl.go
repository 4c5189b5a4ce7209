package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// The database URL may hold a password, and a process's command line is
// readable by every other process on the host (/proc/<pid>/cmdline, ps).
// So berth takes the URL from the environment (BERTH_DATABASE_URL, which
// /proc shows to the same user only) or from a file only its owner can
// read, and warns when it comes on the command line.

// fromEnvAnnotation marks a flag envFallback set from the environment, so
// that code can tell a value the environment gave from one on argv.
const fromEnvAnnotation = "berth-from-env"

// databaseURL returns the URL given by --database-url (or
// BERTH_DATABASE_URL) or read from --database-url-file (or
// BERTH_DATABASE_URL_FILE); "" means the embedded cluster.
func (f *dbFlags) databaseURL(log *slog.Logger) (string, error) {
	if f.databaseURLFile == "" {
		if f.databaseURLString != "" && !setFromEnv(f.flags, "database-url") {
			log.Warn("the database URL on the command line is visible to every process on this host (ps, /proc/<pid>/cmdline); pass it in BERTH_DATABASE_URL or --database-url-file instead")
		}
		return f.databaseURLString, nil
	}
	if f.databaseURLString != "" {
		return "", fmt.Errorf("both --database-url (or BERTH_DATABASE_URL) and --database-url-file are set: give one")
	}
	return readURLFile(f.databaseURLFile)
}

// readURLFile reads a database URL from path, refusing, as ssh does with
// private keys, a file that users other than its owner may read or write.
func readURLFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--database-url-file: %w", err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		return "", fmt.Errorf("--database-url-file %s has mode %04o: group and others may read or change it, and the URL may hold a password; make it private with `chmod 600 %s` (Kubernetes: defaultMode 0400 on the secret volume)", path, mode, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--database-url-file: %w", err)
	}
	url := strings.TrimSpace(string(b))
	if url == "" {
		return "", fmt.Errorf("--database-url-file %s is empty; it should hold one PostgreSQL URL", path)
	}
	if strings.ContainsAny(url, "\r\n") {
		return "", fmt.Errorf("--database-url-file %s holds more than one line; it should hold one PostgreSQL URL", path)
	}
	return url, nil
}

// setFromEnv reports whether envFallback gave the flag its value.
func setFromEnv(flags *pflag.FlagSet, name string) bool {
	f := flags.Lookup(name)
	return f != nil && len(f.Annotations[fromEnvAnnotation]) > 0
}
