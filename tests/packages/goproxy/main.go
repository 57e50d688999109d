// Command goproxy writes one version of a local Go module into a file-based module proxy
// (GOPROXY=file://DIR): DIR/<module>/@v/list, <version>.info, <version>.mod and <version>.zip,
// the zip made by golang.org/x/mod/zip, the code the go command itself uses for module zips (so
// it leaves out what a real proxy would: nested modules, vendor/, symlinks). tests/packages/run.sh
// uses it so that `go get` in a separate module really resolves the gen/go module, with no VCS
// host reachable.
//
//	go run . -dir ../../../gen/go -version v0.1.0 -out /tmp/proxy
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", "", "the module's directory (holding its go.mod)")
	version := flag.String("version", "", "the version to publish, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy's root directory")
	flag.Parse()
	if err := run(*dir, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "goproxy:", err)
		os.Exit(1)
	}
}

func run(dir, version, out string) error {
	if dir == "" || version == "" || out == "" {
		return fmt.Errorf("-dir, -version and -out are required")
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	zf, err := os.Create(filepath.Join(at, escVersion+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(zf, mv, dir); err != nil {
		zf.Close()
		return fmt.Errorf("zip %s: %w", dir, err)
	}
	if err := zf.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, escVersion+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, escVersion+".info"), info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s@%s -> %s\n", path, version, at)
	return nil
}
