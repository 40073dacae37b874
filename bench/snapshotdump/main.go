// Command snapshotdump writes the `kubectl get -A -o yaml`-shaped List that snapshot's BenchmarkRead* read, for
// measuring `syncmedic scan --snapshot` itself (bench/README.md, "snapshot").
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/syncmedic/syncmedic/internal/synthdump"
)

func main() {
	objects := flag.Int("objects", 50_000, "objects in the List")
	used := flag.Int("used", 4, "of every 5 objects, how many are of kinds a rule reads (0 to 4); the others are PersistentVolumeClaims, ConfigMaps, Pods or ReplicaSets")
	flag.Parse()
	if *objects < 0 || *used < 0 || *used > 4 {
		fmt.Fprintln(os.Stderr, "snapshotdump: -objects must be >= 0 and -used 0 to 4")
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	synthdump.Write(w, *objects, *used)
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "snapshotdump:", err)
		os.Exit(1)
	}
}
