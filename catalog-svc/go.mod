module github.com/sharedos/toolshare/catalog-svc

go 1.26.0

replace github.com/sharedos/toolshare/proto => ../proto

replace github.com/sharedos/toolshare/services => ../services

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mark3labs/mcp-go v1.2.1
	github.com/mtibben/confusables v0.0.0-20210201002637-9d1b0723b659
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/sharedos/toolshare/proto v0.0.0-00010101000000-000000000000
	github.com/sharedos/toolshare/services v0.0.0-00010101000000-000000000000
	golang.org/x/text v0.44.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/mod v0.43.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

require (
	github.com/go-jose/go-jose/v4 v4.1.4
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/pressly/goose/v3 v3.30.0 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/net v0.62.0
	golang.org/x/oauth2 v0.37.0
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0
)
