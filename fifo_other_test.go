//go:build !unix

package main

import "errors"

// mkfifo is unsupported where there are no named pipes.
func mkfifo(string) error { return errors.ErrUnsupported }
