package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/prometheus/common/config"
)

const (
	maxKeyFileBytes = 64 << 10
	maxCAFileBytes  = 1 << 20
)

// ReadRegularFile reads a regular file of at most max bytes, refusing a FIFO without waiting on it; its errors do not name the file.
func ReadRegularFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathless(err)
	}
	if m := fi.Mode(); !m.IsRegular() {
		kind := map[fs.FileMode]string{fs.ModeDir: "a directory", fs.ModeNamedPipe: "a FIFO", fs.ModeDevice: "a device"}[m.Type()&^fs.ModeCharDevice]
		return nil, fmt.Errorf("it is %s, not a regular file", cmp.Or(kind, "something else"))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && (fi.Size() > max || int64(len(b)) > max) {
		err = fmt.Errorf("it is larger than %d KiB", max>>10)
	}
	return b, pathless(err)
}

// pathless returns the cause of a file error without its operation and path.
func pathless(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// CheckFiles reads every file that cfg names, naming the first that cannot be read.
func CheckFiles(cfg *config.HTTPClientConfig) (err error) {
	check := func(key, path string, max int64) {
		if path == "" || err != nil {
			return
		}
		if _, e := ReadRegularFile(path, max); e != nil {
			err = fmt.Errorf("%s: cannot read %s: %w", key, path, e)
		}
	}
	Credentials(cfg, func(setting, _, file string) {
		key := setting + ".files"
		if setting == "authorization" {
			key = "authorization.credentials_file"
		}
		check(key, file, maxKeyFileBytes)
	})
	check("tls_config.ca_file", cfg.TLSConfig.CAFile, maxCAFileBytes)
	check("tls_config.cert_file", cfg.TLSConfig.CertFile, maxKeyFileBytes)
	check("tls_config.key_file", cfg.TLSConfig.KeyFile, maxKeyFileBytes)
	return err
}

// ReadKeyFile reads a key file as the transport will and checks that the key can be sent.
func ReadKeyFile(path string) (string, error) {
	return (&fileSecret{path: path, max: maxKeyFileBytes}).key()
}

// ValidKey tells whether key is non-empty and free of control characters.
func ValidKey(key string) bool {
	return key != "" && !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// fileSecret is a prometheus/common SecretReader of a file of at most max bytes, re-read when it changes.
type fileSecret struct {
	path string
	max  int64

	mu     sync.Mutex
	info   os.FileInfo
	cached string
}

func (s *fileSecret) Fetch(context.Context) (string, error) {
	v, err := s.read()
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", s.path, err)
	}
	return v, nil
}

func (s *fileSecret) Description() string { return "file " + s.path }
func (*fileSecret) Immutable() bool       { return false }

func (s *fileSecret) key() (string, error) {
	key, err := s.read()
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read the key file %s: %w", s.path, err)
	case key == "":
		return "", fmt.Errorf("the key file %s is empty", s.path)
	case !ValidKey(key):
		return "", fmt.Errorf("the key file %s has control characters such as a line break inside the key: write the key alone on one line", s.path)
	}
	return key, nil
}

// read returns the secret, trimmed, or the error of reading the file.
func (s *fileSecret) read() (string, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return "", pathless(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info != nil && os.SameFile(fi, s.info) && fi.Size() == s.info.Size() && fi.ModTime().Equal(s.info.ModTime()) {
		return s.cached, nil
	}
	b, err := ReadRegularFile(s.path, s.max)
	if err != nil {
		return "", err
	}
	s.info, s.cached = fi, strings.TrimSpace(string(b))
	return s.cached, nil
}
