package main

// The backends --link names, besides the default that comes with verbs:
// each registers itself with package link when imported.
import (
	_ "github.com/uroce/uroce/pkg/link/afpacket"
	_ "github.com/uroce/uroce/pkg/link/afxdp"
)
