package admin

import (
	"bytes"
	"testing"
)

// FuzzParseImport feeds any bytes, as JSON or CSV, to the user import parser of the admin
// tool: no panic; a file is refused whole or read row by row, and every row names where it is
// in the file and has either a user or its error.
func FuzzParseImport(f *testing.F) {
	f.Add(false, []byte("username,password,email,email_verified,updated_at\nalice,pw,a@example.com,true,1700000000\nbob,pw2\n"))
	f.Add(false, []byte("\ufeffuid,username,password\nu1,carol,pw\n\"u2,dave,pw\n"))
	f.Add(false, []byte("username,password,username\n"))
	f.Add(false, []byte("username,password,updated_at\nx,y,-1\nx,y,nope\n"))
	f.Add(true, []byte(`[{"uid":"u1","username":"alice","password":"pw"},{"uid":2},{"nope":true}]`))
	f.Add(true, []byte(`{"users":[{"uid":"u1","username":"alice","password":"pw"}]}`))
	f.Add(true, []byte(`{"clients":[]}`))
	f.Add(true, []byte(`[`))
	f.Fuzz(func(t *testing.T, asJSON bool, data []byte) {
		format := FormatCSV
		if asJSON {
			format = FormatJSON
		}
		rows, err := ParseImport(bytes.NewReader(data), format)
		if err != nil {
			if rows != nil {
				t.Fatal("rows came with an error")
			}
			return
		}
		for i, r := range rows {
			if r.Where == "" {
				t.Fatalf("row %d does not say where it is", i)
			}
		}
		_ = SniffFormat(data)
	})
}
