//go:build unix

package pgembed

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	confName    = "berth.conf"
	includeLine = "include = '" + confName + "'"
)

// writeConf writes the settings berth depends on into berth.conf and makes
// postgresql.conf include it. It is rewritten on every start so a moved
// cluster directory still gets the right socket path. A plain include (not
// include_if_exists) makes a missing file fail loudly instead of letting
// the server fall back to TCP on localhost:5432.
func (c *Cluster) writeConf() error {
	var b strings.Builder
	b.WriteString("# Written by berth on every start of the embedded server; edits are overwritten.\n")
	b.WriteString("listen_addresses = ''\n")
	fmt.Fprintf(&b, "port = %d\n", c.port)
	// The double quotes keep a path with commas or spaces one list element.
	fmt.Fprintf(&b, "unix_socket_directories = %s\n", confQuote(`"`+c.sockDir+`"`))
	b.WriteString("unix_socket_permissions = 0700\n")
	if err := c.writeDataFile(confName, []byte(b.String())); err != nil {
		return err
	}

	main := filepath.Join(c.dataDir, "postgresql.conf")
	raw, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("embedded postgres: read %s: %w", main, err)
	}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if strings.TrimSpace(string(line)) == includeLine {
			return nil
		}
	}
	f, err := os.OpenFile(main, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("embedded postgres: open %s: %w", main, err)
	}
	_, werr := f.WriteString("\n# berth: settings of the embedded server\n" + includeLine + "\n")
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("embedded postgres: append to %s: %w", main, werr)
	}
	return nil
}

// writeDataFile replaces a file in the data directory atomically and hands
// it to the server's account.
func (c *Cluster) writeDataFile(name string, data []byte) error {
	p := filepath.Join(c.dataDir, name)
	tmp := p + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("embedded postgres: write %s: %w", tmp, err)
	}
	if err := c.as.chown(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("embedded postgres: write %s: %w", p, err)
	}
	return nil
}

// confQuote quotes a value for postgresql.conf.
func confQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
