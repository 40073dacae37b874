package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// child is the server process as seen from the parent: it runs apart so that the parent's CPU time and heap are
// the consumer's alone.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
}

func startChild(apps, updates, stuckEvery, hookedEvery int) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve", fmt.Sprintf("-apps=%d", apps), fmt.Sprintf("-updates=%d", updates),
		fmt.Sprintf("-stuck-every=%d", stuckEvery), fmt.Sprintf("-hooked-every=%d", hookedEvery), "-server-version="+*serverVersion)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	c.out.Buffer(make([]byte, 64<<10), 1<<20)
	line, err := c.line()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("server process: %w", err)
	}
	addr, ok := strings.CutPrefix(line, "listening ")
	if !ok {
		c.stop()
		return nil, fmt.Errorf("server process said %q", line)
	}
	c.addr = addr
	return c, nil
}

func (c *child) line() (string, error) {
	if !c.out.Scan() {
		if err := c.out.Err(); err != nil {
			return "", err
		}
		return "", errors.New("server process ended")
	}
	return c.out.Text(), nil
}

func (c *child) stats() (serverStats, error) {
	var s serverStats
	if _, err := fmt.Fprintln(c.in, "stats"); err != nil {
		return s, err
	}
	line, err := c.line()
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal([]byte(line), &s)
}

func (c *child) reset() error {
	if _, err := fmt.Fprintln(c.in, "reset"); err != nil {
		return err
	}
	_, err := c.line()
	return err
}

// stop closes stdin (the child exits) and waits for it.
func (c *child) stop() {
	_ = c.in.Close()
	_ = c.cmd.Wait()
}
