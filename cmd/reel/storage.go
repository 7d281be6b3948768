package main

import (
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/store"
	"github.com/reelkit/reel/formats/store/azstore"
	"github.com/reelkit/reel/formats/store/s3store"
)

// registerStores wires the storage URL schemes every DATASET argument and
// --out accept (docs/storage.md), configured from the environment a user
// already sets for the AWS CLI, DuckDB or gsutil:
//
//	s3://      AWS_ENDPOINT_URL (an S3-compatible server, e.g. http://127.0.0.1:7070),
//	           AWS_REGION / AWS_DEFAULT_REGION; credentials from the AWS chain
//	           (environment, AWS_PROFILE / shared credentials file, IRSA, EKS Pod
//	           Identity, EC2 instance metadata)
//	gs://      Google Cloud Storage through its S3-interoperable XML API with an
//	           HMAC key: GCS_HMAC_KEY_ID and GCS_HMAC_SECRET (ADC tokens are not
//	           accepted by that API)
//	azblob://  Azure Blob Storage: AZURE_STORAGE_CONNECTION_STRING, or
//	           AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (Shared Key),
//	           AZURE_STORAGE_SAS_TOKEN, or else Microsoft Entra ID through
//	           azidentity's DefaultAzureCredential (AZURE_CLIENT_ID /
//	           AZURE_TENANT_ID / AZURE_CLIENT_SECRET, AKS workload identity,
//	           managed identity, the Azure CLI's login)
func registerStores(getenv func(string) string) {
	s3 := s3store.Options{Region: firstNonEmpty(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"))}
	if ep := getenv("AWS_ENDPOINT_URL_S3"); ep != "" {
		s3.Endpoint, s3.Insecure = endpointHost(ep)
		s3.PathStyle = true
	} else if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		s3.Endpoint, s3.Insecure = endpointHost(ep)
		s3.PathStyle = true // S3-compatible servers rarely do virtual-host buckets
	}
	store.Register("s3", s3store.Opener(s3))

	gs := s3store.Options{Endpoint: s3store.GCSEndpoint, Region: "auto",
		AccessKey: getenv("GCS_HMAC_KEY_ID"), SecretKey: getenv("GCS_HMAC_SECRET")}
	if gs.AccessKey == "" || gs.SecretKey == "" {
		store.Refuse("gs", "gs:// needs an HMAC key for Cloud Storage's S3-interoperable API: set GCS_HMAC_KEY_ID and GCS_HMAC_SECRET (gcloud storage hmac create SERVICE_ACCOUNT)")
	} else {
		store.Register("gs", s3store.Opener(gs))
	}
	az := azstore.Options{ConnectionString: getenv("AZURE_STORAGE_CONNECTION_STRING"), Account: getenv("AZURE_STORAGE_ACCOUNT"),
		Key: getenv("AZURE_STORAGE_KEY"), SASToken: getenv("AZURE_STORAGE_SAS_TOKEN")}
	if az.ConnectionString == "" && az.Account == "" {
		store.Refuse("azblob", "azblob:// needs the storage account: set AZURE_STORAGE_ACCOUNT (credentials from AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or Microsoft Entra ID: workload or managed identity, AZURE_CLIENT_SECRET, az login), or AZURE_STORAGE_CONNECTION_STRING")
	} else {
		store.Register("azblob", azstore.Opener(az))
	}
}

// endpointHost turns AWS_ENDPOINT_URL (http://host:port or host:port) into
// minio-go's host and whether it is plain HTTP.
func endpointHost(ep string) (host string, insecure bool) {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host, u.Scheme == "http"
	}
	return strings.TrimSuffix(ep, "/"), false
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// registerUploadMetrics exposes a dataset writer's upload figures on
// /metrics (docs/metrics.md).
func registerUploadMetrics(reg prometheus.Registerer, stats func() formats.Stats) {
	counter := func(name, help string, v func(formats.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	gauge := func(name, help string, v func(formats.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	reg.MustRegister(
		counter("reel_storage_uploads_total", "Closed dataset files uploaded to object storage and released from the local spool directory.",
			func(s formats.Stats) int64 { return s.Uploaded }),
		counter("reel_storage_upload_bytes_total", "Bytes of the uploaded files.",
			func(s formats.Stats) int64 { return s.UploadedBytes }),
		counter("reel_storage_upload_errors_total", "Failed upload attempts; each is retried with backoff.",
			func(s formats.Stats) int64 { return s.UploadErrors }),
		gauge("reel_storage_upload_pending_files", "Closed files waiting on local disk for their upload.",
			func(s formats.Stats) int64 { return s.UploadPending }),
		gauge("reel_storage_upload_pending_bytes", "Bytes of the closed files waiting for their upload.",
			func(s formats.Stats) int64 { return s.UploadPendingBytes }),
	)
}
