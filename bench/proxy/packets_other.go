//go:build !linux

package main

import (
	"errors"
	"time"
)

// The hop phase reads packets from an AF_PACKET socket on lo: Linux only.
var errNeedsLinux = errors.New("the hop phase and CPU pinning need Linux (AF_PACKET, sched_setaffinity)")

type packetSocket struct{}

func openPacketSocket([]uint16, int) (*packetSocket, error) { return nil, errNeedsLinux }

var errNoPacket = errors.New("no packet")

func (*packetSocket) read() ([]byte, time.Time, error) { return nil, time.Time{}, errNeedsLinux }
func (*packetSocket) drops() (uint64, error)           { return 0, errNeedsLinux }
func (*packetSocket) close()                           {}

func pinSelf(string) error { return errNeedsLinux }
