"""Generated protocol buffer code; see hack/gen-proto.sh."""
