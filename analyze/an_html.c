/*
 * What the HTML pages share: escaping, the page's head and style sheet,
 * the script that makes the timelines zoom and pan.  Everything inline:
 * a page opens offline and can be attached to a CI run.
 */
#include <stdio.h>
#include <string.h>

#include "an_html.h"

void html_text(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		switch (s[i]) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(s[i], f);
		}
	}
}

void html_js_string(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; s && i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		/* <, > and & as escapes: "</script>" never appears in the page. */
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static const char *const palette[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2",
				      "#b279a2", "#ff9da6", "#9d755d", "#bab0ac", "#eeca3b"};

const char *html_color(size_t i)
{
	return palette[i % (sizeof palette / sizeof palette[0])];
}

/* No fixed widths anywhere: tables lay out to the page, long names wrap,
 * plots are SVGs scaled to the column (viewBox), the timeline draws itself
 * to its element's width. */
static const char style[] =
	"*{box-sizing:border-box}"
	"body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d1d1f;background:#fafafa}"
	"main{max-width:1500px;margin:0 auto;padding:16px 24px}"
	"h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}"
	"h3{font-size:1.02em;margin:0 0 .3em}"
	".meta{color:#555;margin:.2em 0;overflow-wrap:anywhere}"
	".s{color:#555;font-size:.92em;overflow-wrap:anywhere}"
	"table{border-collapse:collapse;width:100%;table-layout:fixed;margin:.4em 0}"
	"td,th{padding:3px 8px;text-align:left;vertical-align:top;border-bottom:1px solid #eee;overflow-wrap:anywhere}"
	"th{background:#f0f0f0}td.n,th.n{text-align:right;width:7.5em}"
	"code,pre{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.9em}"
	"pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}"
	".finding{background:#fff;border:1px solid #ddd;border-left:5px solid #e45756;border-radius:4px;"
	"padding:10px 14px;margin:10px 0}"
	".finding .head{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:baseline}"
	".kind{font-weight:600}.num{color:#333}.cost{font-weight:600;color:#b00020}"
	".where{margin:.35em 0 .2em;overflow-wrap:anywhere}.where code{background:#f3f3f3;padding:1px 4px;border-radius:3px}"
	".src{background:#f6f8fa;border:1px solid #e3e6ea;border-radius:3px;padding:4px 8px;margin:.2em 0}"
	".nosrc{color:#777;font-style:italic;margin:.2em 0}"
	".advice{background:#eef6ee;border-radius:3px;padding:5px 9px;margin:.4em 0 .2em}"
	".also{color:#444;margin:.2em 0}"
	"details{margin:.3em 0}summary{cursor:pointer;color:#0b5cad}"
	".frames{margin:.2em 0 0;padding-left:1.4em}.frames li{overflow-wrap:anywhere}.lib{color:#777}"
	".plot{background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px;margin:.5em 0}"
	".plot svg{display:block;width:100%;height:auto}"
	".legend{display:flex;flex-wrap:wrap;gap:4px 16px;list-style:none;padding:0;margin:.4em 0 0}"
	".legend li{display:flex;align-items:center;gap:6px;font-size:.9em}"
	".sw{display:inline-block;width:12px;height:12px;border-radius:2px;flex:none}"
	".tlbar{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin-bottom:4px}"
	".tlbar button{font:inherit;padding:1px 9px}"
	"svg.timeline{display:block;width:100%;cursor:grab;touch-action:none;user-select:none}"
	".cards{display:flex;flex-wrap:wrap;gap:10px;margin:.5em 0}"
	".card{background:#fff;border:1px solid #ddd;border-radius:4px;padding:6px 12px;min-width:9em}"
	".card b{display:block;font-size:1.3em}"
	".verdict{font-size:1.15em;font-weight:600;padding:6px 10px;border-radius:4px;background:#fff;border:1px solid #ddd}"
	".verdict.bad{border-left:5px solid #e45756}.verdict.good{border-left:5px solid #54a24b}"
	".verdict.same{border-left:5px solid #999}";

void html_page_begin(FILE *f, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
	      f);
	html_str(f, title);
	fprintf(f, "</title>\n<style>%s</style></head>\n<body><main>\n", style);
}

/* The timelines: each <svg class="timeline" data-src="ID"> reads its data
 * from <script type="application/json" id="ID">: w (the window, ns), rows
 * (labels), bin and hist ([row, bin, busy fraction]), ev ([row, start,
 * duration, kind, name index, site index]), names, sites, marks ([row,
 * start, duration, 0 gap / 1 burst]), from (the first kept record).  It draws
 * the part of the window in view; the wheel zooms at the pointer, a drag
 * pans, the buttons zoom and reset.  data-v0/data-v1 hold the range in view
 * (ns from the window's start). */
static const char script[] =
	"(function(){'use strict';"
	"var NS='http://www.w3.org/2000/svg';"
	"function fmt(ns){var a=Math.abs(ns);if(a>=1e9)return(ns/1e9).toFixed(3)+' s';"
	"if(a>=1e6)return(ns/1e6).toFixed(3)+' ms';if(a>=1e3)return(ns/1e3).toFixed(1)+' us';return Math.round(ns)+' ns';}"
	"function el(p,n,at,tx){var e=document.createElementNS(NS,n);for(var k in at)e.setAttribute(k,at[k]);"
	"if(tx!==undefined)e.textContent=tx;p.appendChild(e);return e;}"
	"var KC={1:'#4c78a8',2:'#f58518',3:'#9d755d'},KN={1:'kernel',2:'copy',3:'memset'};"
	"function timeline(svg){var d=JSON.parse(document.getElementById(svg.getAttribute('data-src')).textContent);"
	"var LW=120,RH=26,TOP=4,AX=22,H=TOP+d.rows.length*RH+AX;var v0=0,v1=d.w;"
	"var lab=document.getElementById(svg.getAttribute('data-range'));"
	"function W(){return Math.max(300,svg.getBoundingClientRect().width||800);}"
	"function draw(){var w=W(),pw=w-LW-8,sc=pw/(v1-v0);svg.setAttribute('viewBox','0 0 '+w+' '+H);"
	"svg.setAttribute('height',H);while(svg.firstChild)svg.removeChild(svg.firstChild);"
	"svg.setAttribute('data-v0',v0);svg.setAttribute('data-v1',v1);"
	"if(lab)lab.textContent=fmt(v0)+' \\u2013 '+fmt(v1)+' of '+fmt(d.w);"
	"var clip='c'+svg.getAttribute('data-src');var defs=el(svg,'defs',{});"
	"el(el(defs,'clipPath',{id:clip}),'rect',{x:LW,y:0,width:pw,height:H});"
	"for(var r=0;r<d.rows.length;r++){var y=TOP+r*RH;el(svg,'text',{x:4,y:y+15,'font-size':12},d.rows[r]);"
	"el(svg,'rect',{x:LW,y:y,width:pw,height:18,fill:'#f0f0f0'});}"
	"var g=el(svg,'g',{'clip-path':'url(#'+clip+')'});"
	"d.hist.forEach(function(h){var s=h[1]*d.bin,e=s+d.bin;if(e<v0||s>v1||s>=d.from)return;"
	"el(g,'rect',{x:LW+(s-v0)*sc,y:TOP+h[0]*RH,width:Math.max(d.bin*sc,0.5),height:18,fill:'#4c78a8','fill-opacity':Math.max(0.15,h[2])});});"
	"var last=[],n=0;"
	"for(var i=0;i<d.ev.length;i++){var ev=d.ev[i],s=ev[1],e=s+ev[2];if(e<v0||s>v1)continue;"
	"var x=LW+(s-v0)*sc,wd=ev[2]*sc,L=last[ev[0]];"
	"if(wd<1&&L&&x-L.x1<1&&L.k===ev[3]){L.x1=Math.max(L.x1,x+wd);L.n++;L.r.setAttribute('width',Math.max(L.x1-L.x0,0.6));"
	"L.t.textContent=L.n+' '+KN[ev[3]]+'s (zoom in to see each)';continue;}"
	"if(n>6000)continue;n++;var rc=el(g,'rect',{x:x,y:TOP+ev[0]*RH,width:Math.max(wd,0.6),height:18,fill:KC[ev[3]]||'#4c78a8'});"
	"rc.setAttribute('class','ev');"
	"var t=el(rc,'title',{},(ev[4]>=0?d.names[ev[4]]:KN[ev[3]])+'\\n'+fmt(ev[2])+' at '+fmt(s)+(ev[5]>=0?'\\n'+d.sites[ev[5]]:''));"
	"last[ev[0]]={x0:x,x1:x+wd,r:rc,t:t,n:1,k:ev[3]};}"
	"d.marks.forEach(function(m){var s=m[1],e=s+m[2];if(e<v0||s>v1)return;var gap=m[3]===0;"
	"var rc=el(g,'rect',{x:LW+(s-v0)*sc,y:TOP+m[0]*RH+(gap?18:-3),width:Math.max(m[2]*sc,1),height:gap?5:3,"
	"fill:gap?'#e45756':'#b279a2','class':gap?'gap':'burst'});"
	"el(rc,'title',{},(gap?'idle gap ':'kernel burst ')+fmt(m[2])+' at '+fmt(s)+(m[4]?'\\n'+m[4]:''));});"
	"if(d.from>0&&d.from<v1){var fx=LW+Math.max(0,(d.from-v0)*sc);"
	"el(g,'line',{x1:fx,x2:fx,y1:0,y2:H-AX,stroke:'#888','stroke-dasharray':'3 3'});}"
	"for(var k=0;k<=5;k++){var tv=v0+(v1-v0)*k/5,tx=LW+pw*k/5;"
	"el(svg,'line',{x1:tx,x2:tx,y1:H-AX,y2:H-AX+4,stroke:'#555'});"
	"el(svg,'text',{x:tx,y:H-4,'font-size':11,'text-anchor':k===0?'start':k===5?'end':'middle'},fmt(tv));}}"
	"function zoom(f,at){var w=W(),pw=w-LW-8;var c=v0+(v1-v0)*Math.min(1,Math.max(0,(at-LW)/pw));"
	"var span=Math.min(d.w,Math.max(1000,(v1-v0)*f));v0=c-(c-v0)*span/(v1-v0);v1=v0+span;clampv();draw();}"
	"function clampv(){var span=v1-v0;if(v0<0){v0=0;v1=span;}if(v1>d.w){v1=d.w;v0=Math.max(0,d.w-span);}}"
	"svg.addEventListener('wheel',function(e){e.preventDefault();var r=svg.getBoundingClientRect();"
	"zoom(Math.pow(1.25,(e.deltaY||e.deltaX)/100),e.clientX-r.left);},{passive:false});"
	"var drag=null;svg.addEventListener('pointerdown',function(e){drag={x:e.clientX,v0:v0,v1:v1};"
	"svg.style.cursor='grabbing';});"
	"window.addEventListener('pointermove',function(e){if(!drag)return;var pw=W()-LW-8;"
	"var dt=(e.clientX-drag.x)*(drag.v1-drag.v0)/pw;v0=drag.v0-dt;v1=drag.v1-dt;clampv();draw();});"
	"window.addEventListener('pointerup',function(){drag=null;svg.style.cursor='';});"
	"svg.addEventListener('dblclick',function(){v0=0;v1=d.w;draw();});"
	"var bar=svg.previousElementSibling;if(bar)bar.addEventListener('click',function(e){var a=e.target.getAttribute('data-zoom');"
	"if(!a)return;if(a==='reset'){v0=0;v1=d.w;draw();}else zoom(+a,LW+(W()-LW-8)/2);});"
	"window.addEventListener('resize',draw);draw();}"
	"document.querySelectorAll('svg.timeline').forEach(timeline);"
	"})();";

void html_page_end(FILE *f)
{
	fprintf(f, "</main>\n<script>%s</script>\n</body></html>\n", script);
}
