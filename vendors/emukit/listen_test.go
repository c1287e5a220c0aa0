package emukit

import (
	"net"
	"testing"
)

func TestDialAddr(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"127.0.0.1:3000", "127.0.0.1:3000"},
		{"0.0.0.0:3000", "127.0.0.1:3000"},
		{"[::]:3000", "127.0.0.1:3000"},
		{"10.1.2.3:80", "10.1.2.3:80"},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			a, err := net.ResolveTCPAddr("tcp", tt.listen)
			if err != nil {
				t.Fatal(err)
			}
			if got := DialAddr(a); got != tt.want {
				t.Errorf("DialAddr(%s) = %s, want %s", tt.listen, got, tt.want)
			}
		})
	}
}
