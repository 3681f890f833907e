package main

import (
	"errors"
	"io"
)

func runStats(args []string, stdout, stderr io.Writer) error    { return errors.New("not wired yet") }
func runWhatif(args []string, stdout, stderr io.Writer) error   { return errors.New("not wired yet") }
func runProfiles(args []string, stdout, stderr io.Writer) error { return errors.New("not wired yet") }
