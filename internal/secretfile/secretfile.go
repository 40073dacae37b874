// Package secretfile reads a token from a file and reads it again when the file changes, as a mounted Secret does
// when it is updated in place: the kubelet writes the new keys into a new directory and swaps the ..data symlink the
// key's own symlink goes through, so the path names another file from then on.
package secretfile

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// File is a token file, trimmed of surrounding white space. Value stats the file (following symlinks) on each call
// and reads it again only when it is another file or its size or modification time changed.
type File struct {
	path string
	flag string // the flag that named the file, for errors ("--api-token-file")

	mu    sync.Mutex
	info  os.FileInfo
	value string
	err   error // the last failed re-read, nil after a good one
}

// Open reads the file once: an unreadable or empty file is an error naming flag (a configuration error, not to retry).
func Open(flag, path string) (*File, error) {
	f := &File{path: path, flag: flag}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	value, err := f.read()
	if err != nil {
		return nil, err
	}
	f.info, f.value = info, value
	return f, nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Value returns the token: the file's content now, or, while the file cannot be read or is empty (the moment of a
// swap, a Secret being rewritten), the last good content.
func (f *File) Value() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := os.Stat(f.path)
	if err != nil {
		f.err = fmt.Errorf("%s: %w", f.flag, err)
		return f.value
	}
	if f.info != nil && os.SameFile(f.info, info) && info.Size() == f.info.Size() && info.ModTime().Equal(f.info.ModTime()) {
		return f.value
	}
	value, err := f.read()
	if err != nil {
		f.err = err
		return f.value
	}
	f.info, f.value, f.err = info, value, nil
	return f.value
}

// Err returns why the last look at the file kept the previous token (nil when the file was read).
func (f *File) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *File) read() (string, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.flag, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s %s is empty", f.flag, f.path)
	}
	return v, nil
}
