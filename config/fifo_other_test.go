//go:build !unix

package config

import "errors"

// mkfifo is unsupported where there are no named pipes.
func mkfifo(string) error { return errors.ErrUnsupported }
