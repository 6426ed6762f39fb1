package client

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/common/config"
)

// ReadKeyFile reads a key file as the transport will (surrounding
// whitespace, such as a trailing newline, trimmed) and checks that the key
// can be sent, so a bad file is refused at start rather than on every poll.
func ReadKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the key file %s: %w", path, errors.Unwrap(err))
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", fmt.Errorf("the key file %s is empty", path)
	case !ValidKey(key):
		return "", fmt.Errorf("the key in %s has control characters such as a line break inside it: write the key alone on one line", path)
	}
	return key, nil
}

// ValidKey tells whether key can be sent in an Authorization header: not
// empty, and without control characters such as line breaks.
func ValidKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// keyLookup returns how to find the current key, for redaction: inline, or
// read from the file that the transport reads too, whose cache it also
// returns for the guard's check (nil for an inline key).
func keyLookup(a *config.Authorization) (redactor, *keyFileCache) {
	switch {
	case a == nil:
		return nil, nil
	case a.CredentialsFile != "":
		k := &keyFileCache{path: a.CredentialsFile}
		return k.key, k
	}
	key := string(a.Credentials)
	return func() string { return key }, nil
}

// keyFileCache re-reads a key file only when it changed: a new file swapped
// in by a rename (a different inode, as Kubernetes does), or one rewritten
// in place (another size or modification time).
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

// read returns the current key, trimmed, or the error of reading the file
// (whose message names the file and the cause, never its content).
func (k *keyFileCache) read() (string, error) {
	fi, err := os.Stat(k.path)
	if err != nil {
		return "", err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.info != nil && os.SameFile(fi, k.info) && fi.Size() == k.info.Size() && fi.ModTime().Equal(k.info.ModTime()) {
		return k.cached, nil
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		return "", err
	}
	k.info, k.cached = fi, strings.TrimSpace(string(b))
	return k.cached, nil
}
