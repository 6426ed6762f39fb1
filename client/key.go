package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/prometheus/common/config"
)

// Bounds of the files read for a module.
const (
	maxKeyFileBytes = 64 << 10
	maxCAFileBytes  = 1 << 20
)

// readFile reads the file at path if it is a regular file of at most max
// bytes, opening it without blocking so a FIFO is refused, not waited on.
// Its errors do not name the file.
func readFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil {
		err = checkFileInfo(fi, max)
	}
	if err != nil {
		return nil, pathless(err)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("it is larger than %d KiB", max>>10)
	}
	return b, pathless(err)
}

// checkFileInfo refuses what is no regular file or is larger than max.
func checkFileInfo(fi fs.FileInfo, max int64) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return errors.New("it is a directory, not a regular file")
	case m&fs.ModeNamedPipe != 0:
		return errors.New("it is a FIFO, not a regular file")
	case m&fs.ModeDevice != 0:
		return errors.New("it is a device, not a regular file")
	case !m.IsRegular():
		return errors.New("it is not a regular file")
	case fi.Size() > max:
		return fmt.Errorf("it is larger than %d KiB", max>>10)
	}
	return nil
}

// pathless returns the cause of a file error without its operation and path.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileSecret is prometheus/common's FileSecret read through readFile.
type fileSecret struct {
	path string
	max  int64
}

func (s fileSecret) Fetch(context.Context) (string, error) {
	b, err := readFile(s.path, s.max)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", s.path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (s fileSecret) Description() string { return "file " + s.path }

func (fileSecret) Immutable() bool { return false }

// CheckFiles reads every file that cfg names, naming the first that cannot be read.
func CheckFiles(cfg *config.HTTPClientConfig) error {
	type file struct {
		key, path string
		max       int64
	}
	var files []file
	if a := cfg.Authorization; a != nil {
		files = append(files, file{"authorization.credentials_file", a.CredentialsFile, maxKeyFileBytes})
	}
	if cfg.HTTPHeaders != nil {
		for _, name := range slices.Sorted(maps.Keys(cfg.HTTPHeaders.Headers)) {
			for _, f := range cfg.HTTPHeaders.Headers[name].Files {
				files = append(files, file{"http_headers." + name + ".files", f, maxKeyFileBytes})
			}
		}
	}
	t := &cfg.TLSConfig
	files = append(files, file{"tls_config.ca_file", t.CAFile, maxCAFileBytes},
		file{"tls_config.cert_file", t.CertFile, maxKeyFileBytes}, file{"tls_config.key_file", t.KeyFile, maxKeyFileBytes})
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if _, err := readFile(f.path, f.max); err != nil {
			return fmt.Errorf("%s: cannot read %s: %w", f.key, f.path, err)
		}
	}
	return nil
}

// ReadKeyFile reads a key file as the transport will and checks that the key can be sent.
func ReadKeyFile(path string) (string, error) {
	return (&keyFileCache{path: path}).check()
}

// ValidKey tells whether key is non-empty and free of control characters.
func ValidKey(key string) bool {
	return key != "" && !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// keyFileCache re-reads a key file only when its inode, size or time changed.
type keyFileCache struct {
	path string

	mu     sync.Mutex
	info   os.FileInfo
	cached string
}

// key returns the current key, "" when the file cannot be read.
func (k *keyFileCache) key() string {
	key, _ := k.read()
	return key
}

// check returns the current key, or why it cannot be sent.
func (k *keyFileCache) check() (string, error) {
	key, err := k.read()
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read the key file %s: %w", k.path, err)
	case key == "":
		return "", fmt.Errorf("the key file %s is empty", k.path)
	case !ValidKey(key):
		return "", fmt.Errorf("the key file %s has control characters such as a line break inside the key: write the key alone on one line", k.path)
	}
	return key, nil
}

// read returns the current key, trimmed, or the error of reading the file.
func (k *keyFileCache) read() (string, error) {
	fi, err := os.Stat(k.path)
	if err != nil {
		return "", pathless(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.info != nil && os.SameFile(fi, k.info) && fi.Size() == k.info.Size() && fi.ModTime().Equal(k.info.ModTime()) {
		return k.cached, nil
	}
	b, err := readFile(k.path, maxKeyFileBytes)
	if err != nil {
		return "", err
	}
	k.info, k.cached = fi, strings.TrimSpace(string(b))
	return k.cached, nil
}
