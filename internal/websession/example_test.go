package websession_test

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/berth-mcp/berth/internal/websession"
)

// A form's token is bound to its purpose and to the request it answers:
// the token of one page does not pass for another.
func ExampleNewCSRF() {
	key := "berth_bs_the-session-cookie"
	now := time.Unix(1_800_000_000, 0)
	tok := websession.NewCSRF(key, "consent", now.Add(time.Hour), "client_id=a&state=1")

	fmt.Println(websession.CheckCSRF(key, tok, "consent", now, "client_id=a&state=1"))
	fmt.Println(websession.CheckCSRF(key, tok, "consent", now, "client_id=b&state=1"))
	fmt.Println(websession.CheckCSRF("berth_bs_another-browser", tok, "consent", now, "client_id=a&state=1"))
	fmt.Println(websession.CheckCSRF(key, tok, "consent", now.Add(2*time.Hour), "client_id=a&state=1"))
	// Output:
	// <nil>
	// the form's CSRF token was made for another request
	// the form's CSRF token was not made by this site for this browser
	// the form's CSRF token expired
}

var page = template.Must(template.New("").Parse(`<form method="post" action="/delete">
<input type="hidden" name="item" value="{{.Item}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button>Delete {{.Item}}</button></form>`))

// A page with a form: the GET shows it with a token bound to the item,
// the POST checks the origin, the session and the token before acting.
func ExampleSessions() {
	var sessions *websession.Sessions // websession.New(websession.Options{Store: st, Secure: true})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /confirm", func(w http.ResponseWriter, r *http.Request) {
		s, err := sessions.Get(r)
		if err != nil || s == nil {
			http.Redirect(w, r, "/login", http.StatusFound)
			return
		}
		item := r.URL.Query().Get("item")
		_ = page.Execute(w, map[string]string{"Item": item, "CSRF": sessions.CSRF(s, "delete", item)})
	})
	mux.HandleFunc("POST /delete", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.CheckOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		s, err := sessions.Get(r)
		if err != nil || s == nil || r.ParseForm() != nil {
			http.Error(w, "sign in again", http.StatusUnauthorized)
			return
		}
		item := r.PostForm.Get("item")
		switch err := sessions.CheckCSRF(s, r.PostForm.Get("csrf"), "delete", item); {
		case errors.Is(err, websession.ErrCSRFOtherBinding):
			http.Error(w, "this form was for another item", http.StatusForbidden)
		case err != nil:
			http.Error(w, err.Error(), http.StatusForbidden)
		default:
			fmt.Fprintf(w, "%s deleted by %s", item, s.Username)
		}
	})
	_ = mux
}
