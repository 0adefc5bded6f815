// The PocketBase server the source tests and benchmarks run against: the upstream framework with
// nothing added (its example app without the JS hooks, migrations and self-update plugins).
package main

import (
	"log"

	"github.com/pocketbase/pocketbase"
)

func main() {
	if err := pocketbase.New().Start(); err != nil {
		log.Fatal(err)
	}
}
