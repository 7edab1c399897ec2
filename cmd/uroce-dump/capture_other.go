//go:build !linux

package main

import (
	"context"
	"errors"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

type liveSource struct{}

func openLive(context.Context, string) (*liveSource, error) {
	return nil, errors.New("live capture needs Linux (AF_PACKET)")
}

func (*liveSource) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	return nil, gopacket.CaptureInfo{}, errors.New("no live capture")
}
func (*liveSource) LinkType() layers.LinkType { return layers.LinkTypeEthernet }
func (*liveSource) Close() error              { return nil }
