// Command echo stands in for a Go agent's main package in the generator's
// tests: its flake builds it with glovebox.lib.buildAgent.
package main

func main() {}
