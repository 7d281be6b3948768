//go:build !unix

package filestore

func isCrossDevice(error) bool { return true }
