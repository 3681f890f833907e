// Command labprofile turns a profile, as `idletrace profiles NAME|FILE
// --format json` prints it, into the module parameters of the lab's emulated
// cpuidle driver (lab/idle_emu), or says in one line why the table cannot be
// emulated. scripts/lab.sh runs it on the host.
//
//	idletrace profiles spr --format json | go run ./lab/labprofile
//	poll=1 'names="C1,C1E,C6"' latency_ns=1000,2000,290000 residency_ns=1000,4000,800000 flags=,,
//
// The output is one line of shell words for busybox insmod (which joins them
// with spaces; the kernel's parameter parser takes the quotes off).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The kernel's limits (include/linux/cpuidle.h).
const (
	stateMax = 10 // CPUIDLE_STATE_MAX
	nameLen  = 16 // CPUIDLE_NAME_LEN, with its NUL
)

type state struct {
	Name     string  `json:"name"`
	ExitNs   float64 `json:"exit_latency_ns"`
	ResidNs  float64 `json:"target_residency_ns"`
	Polling  bool    `json:"polling"`
	Disabled bool    `json:"disabled"`
}

type profile struct {
	Name   string  `json:"name"`
	HZ     int     `json:"hz"`
	States []state `json:"states"`
}

func params(p profile) (string, error) {
	if len(p.States) == 0 {
		return "", errors.New("no states")
	}
	if len(p.States) > stateMax {
		return "", fmt.Errorf("%d states, the kernel registers at most %d", len(p.States), stateMax)
	}
	poll := 0
	var names, lat, res, flags []string
	prevLat := -1.0
	for i, s := range p.States {
		if s.Polling {
			if i != 0 {
				return "", fmt.Errorf("state %d (%s) polls: only state 0 can be the kernel's POLL", i, s.Name)
			}
			if s.ExitNs != 0 || s.ResidNs != 0 {
				return "", fmt.Errorf("POLL state %s has exit latency %g ns and residency %g ns: the kernel's POLL is 0/0", s.Name, s.ExitNs, s.ResidNs)
			}
			if s.Disabled {
				return "", fmt.Errorf("POLL state %s disabled: the lab cannot register a disabled POLL (disable it in sysfs inside the VM)", s.Name)
			}
			poll = 1
			continue
		}
		if s.Name == "" || len(s.Name) >= nameLen {
			return "", fmt.Errorf("state %d: name %q is empty or longer than %d bytes", i, s.Name, nameLen-1)
		}
		if strings.ContainsAny(s.Name, ",\"'\\\n\t+|") {
			return "", fmt.Errorf("state %d: name %q holds a character the module parameters cannot carry", i, s.Name)
		}
		if s.ExitNs < 0 || s.ResidNs < 0 || s.ExitNs != float64(uint64(s.ExitNs)) || s.ResidNs != float64(uint64(s.ResidNs)) {
			return "", fmt.Errorf("state %s: exit latency %g ns / residency %g ns are not whole non-negative nanoseconds", s.Name, s.ExitNs, s.ResidNs)
		}
		if s.ExitNs < prevLat {
			return "", fmt.Errorf("state %s: exit latency %g ns is below the shallower state's %g ns", s.Name, s.ExitNs, prevLat)
		}
		prevLat = s.ExitNs
		names = append(names, s.Name)
		lat = append(lat, strconv.FormatUint(uint64(s.ExitNs), 10))
		res = append(res, strconv.FormatUint(uint64(s.ResidNs), 10))
		f := ""
		if s.Disabled {
			f = "off"
		}
		flags = append(flags, f)
	}
	if len(names) == 0 {
		return "", errors.New("no halted state: nothing to emulate")
	}
	out := fmt.Sprintf("poll=%d 'names=\"%s\"' latency_ns=%s residency_ns=%s",
		poll, strings.Join(names, ","), strings.Join(lat, ","), strings.Join(res, ","))
	if strings.Join(flags, "") != "" {
		out += " flags=" + strings.Join(flags, ",")
	}
	return out, nil
}

func main() {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "labprofile:", err)
		os.Exit(1)
	}
	var p profile
	if err := json.Unmarshal(b, &p); err != nil {
		fmt.Fprintln(os.Stderr, "labprofile: reading the profile's JSON:", err)
		os.Exit(1)
	}
	s, err := params(p)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s cannot be emulated: %v\n", p.Name, err)
		os.Exit(1)
	}
	fmt.Println(s)
}
