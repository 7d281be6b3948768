package storetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/reelkit/reel/formats/store"
	"github.com/reelkit/reel/formats/store/azstore"
)

// InstallAzurite is the command that installs Azurite, Microsoft's Azure
// Storage emulator (Node.js); its blob server is azurite-blob.
const InstallAzurite = "npm install -g azurite@3.37.0"

// Azurite's well-known development account (documented by Microsoft, the
// same in every Azurite).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azure is a running Azurite blob server.
type Azure struct {
	Endpoint string // blob service URL: http://127.0.0.1:PORT/devstoreaccount1
	Root     string // Azurite's workspace directory
}

// AzuriteBinary returns the azurite-blob binary's path, or "" when there is
// none: $REEL_AZURITE, or azurite-blob on $PATH.
func AzuriteBinary() string {
	if p := os.Getenv("REEL_AZURITE"); p != "" {
		return p
	}
	if p, err := exec.LookPath("azurite-blob"); err == nil {
		return p
	}
	return ""
}

// StartAzurite starts Azurite's blob server on a free loopback port and
// stops it when the test ends. It skips the test when Azurite is missing,
// and fails it then under CI=true.
func StartAzurite(tb testing.TB) *Azure {
	tb.Helper()
	bin := needBinary(tb, AzuriteBinary(), "azurite-blob", "Azure Blob Storage", InstallAzurite)
	dir := tb.TempDir()
	a := &Azure{Root: filepath.Join(dir, "data")}
	if err := os.MkdirAll(a.Root, 0o755); err != nil {
		tb.Fatal(err)
	}
	addr := freeAddr(tb)
	host, port := addr[:len("127.0.0.1")], addr[len("127.0.0.1:"):]
	a.Endpoint = "http://" + addr + "/" + AzuriteAccount
	// --skipApiVersionCheck: the SDK may speak a newer service version
	// than this Azurite knows; --loose ignores headers it does not serve.
	startServer(tb, dir, addr, 60*time.Second, bin, "--blobHost", host, "--blobPort", port, "--location", a.Root,
		"--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent")
	return a
}

// ConnectionString points an Azure client at this server with the
// development account's Shared Key, the way a user configures a custom
// endpoint (AZURE_STORAGE_CONNECTION_STRING).
func (a *Azure) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AzuriteAccount + ";AccountKey=" + AzuriteKey +
		";BlobEndpoint=" + a.Endpoint + ";"
}

// Options are azstore options for this server.
func (a *Azure) Options() azstore.Options {
	return azstore.Options{Account: AzuriteAccount, Key: AzuriteKey, Endpoint: a.Endpoint}
}

// Env is the environment that points reel's azblob:// at this server.
func (a *Azure) Env() []string {
	return []string{"AZURE_STORAGE_CONNECTION_STRING=" + a.ConnectionString()}
}

// Register makes this process's azblob:// URLs talk to the server.
func (a *Azure) Register(tb testing.TB) {
	tb.Helper()
	store.Register("azblob", azstore.Opener(a.Options()))
	tb.Cleanup(func() { store.Refuse("azblob", "the test's Azurite has stopped") })
}

// Container creates a container and returns its URL, azblob://name.
func (a *Azure) Container(tb testing.TB, name string) string {
	tb.Helper()
	b, err := azstore.New(context.Background(), name, a.Options())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Create(ctx); err != nil {
		tb.Fatal(err)
	}
	return "azblob://" + name
}
