package main

import "fmt"

func matrixMain(c, a string, p *Params) error { return fmt.Errorf("todo") }

type Job struct {
	Topic      string   `json:"topic"`
	Read       string   `json:"read"`
	Expect     int      `json:"expect"`
	Expression string   `json:"expression"`
	Props      []string `json:"props"`
}
